/** `opspad ops watch <operation_id>`: the live progress bar of an operation, until it ends. */
import type { ClientOptions } from './program.ts';
import { settingsFor } from './settings.ts';
import { UsageError } from './usage-error.ts';
import { watchOperation } from './watch.ts';

/** Exit 0 when the operation completed or was cancelled, 1 otherwise. */
export async function opsWatch(operationId: string, options: ClientOptions): Promise<number> {
  const config = settingsFor('ops watch');
  const apiKey = options.key ?? config.OPSPAD_API_KEY;
  if (!apiKey) {
    throw new UsageError('needs an API key: --key <api_key>, or OPSPAD_API_KEY');
  }
  const baseUrl = (options.url ?? config.OPSPAD_URL ?? `http://${config.HOST}:${config.PORT}`).replace(/\/$/, '');
  const last = await watchOperation({ baseUrl, apiKey, operationId, out: process.stdout });
  return last && (last.status === 'completed' || last.status === 'cancelled') ? 0 : 1;
}
