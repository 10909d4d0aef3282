/**
 * `opspad ops export <operation_id> [--format csv] [--failed]`: the operation's results file on
 * stdout, as the server streams it (`> results.csv` to keep it). Writes wait for stdout to take
 * each chunk, so a slow pipe slows the download instead of filling memory.
 */
import { once } from 'node:events';
import { createClient, OpspadError } from '../client/index.ts';
import { apiTarget } from './api-target.ts';
import { CommandError } from './failure.ts';
import type { ExportOptions } from './program.ts';

function exportFailure(error: unknown, operationId: string, baseUrl: string): unknown {
  if (!(error instanceof OpspadError)) {
    return error;
  }
  if (error.code === 'not_found') {
    return new CommandError(
      `operation ${operationId} was not found at ${baseUrl}`,
      'Check the id, and that --key (or OPSPAD_API_KEY) is a key of its organization',
      { cause: error },
    );
  }
  if (error.code === 'network_error' || error.code === 'timeout') {
    return new CommandError(
      `the results of operation ${operationId} could not be read from ${baseUrl}: ${error.message}`,
      'Check that opspad runs there (--url, or OPSPAD_URL), then run the command again',
      { cause: error },
    );
  }
  return new CommandError(`opspad refused the export: ${error.message}`, 'Fix what it names, then run it again', {
    cause: error,
  });
}

export async function opsExport(operationId: string, options: ExportOptions): Promise<number> {
  const { baseUrl, apiKey } = apiTarget('ops export', options);
  // A download has no overall deadline: the timeout covers the answer's headers only.
  const client = createClient({ baseUrl, apiKey });
  try {
    for await (const chunk of client.operations.resultsFile(operationId, {
      format: options.format,
      failed: options.failed,
    })) {
      if (!process.stdout.write(chunk)) {
        await once(process.stdout, 'drain');
      }
    }
  } catch (error) {
    throw exportFailure(error, operationId, baseUrl);
  }
  return 0;
}
