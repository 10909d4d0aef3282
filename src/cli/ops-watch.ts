/** `opspad ops watch <operation_id>`: the live progress bar of an operation, until it ends. */
import { EXIT_CODES, UsageError } from './failure.ts';
import type { ClientOptions } from './program.ts';
import { settingsFor } from './settings.ts';
import { abortOnSignals, howFar, stoppedEarly, watchOperation } from './watch.ts';

/**
 * Exit 0 when the operation completed or was cancelled, 130 on Ctrl-C (the operation goes on);
 * a stream that ended before the operation did is a failure saying how to follow it again.
 */
export async function opsWatch(operationId: string, options: ClientOptions): Promise<number> {
  const config = settingsFor('ops watch');
  const apiKey = options.key ?? config.OPSPAD_API_KEY;
  if (!apiKey) {
    throw new UsageError(
      'no API key was given',
      'Pass --key <api_key>, or set OPSPAD_API_KEY; `opspad keys create --org <name>` makes one',
    );
  }
  const baseUrl = (options.url ?? config.OPSPAD_URL ?? `http://${config.HOST}:${config.PORT}`).replace(/\/$/, '');
  const interrupt = abortOnSignals();
  const watched = await watchOperation({
    baseUrl,
    apiKey,
    operationId,
    out: process.stdout,
    signal: interrupt.signal,
  }).finally(() => interrupt.dispose());
  const again = `\`opspad ops watch ${operationId}\``;
  switch (watched.end) {
    case 'finished':
      return watched.progress?.status === 'completed' || watched.progress?.status === 'cancelled' ? 0 : 1;
    case 'interrupted':
      process.stdout.write(
        `Interrupted: operation ${operationId} keeps running on ${baseUrl} (${howFar(watched.progress)}); ${again} follows it again.\n`,
      );
      return EXIT_CODES.interrupted;
    default:
      throw stoppedEarly(watched, { operationId, baseUrl, followAgain: again });
  }
}
