/** `opspad ops watch <operation_id>`: the live progress bar of an operation, until it ends. */
import { apiTarget } from './api-target.ts';
import { EXIT_CODES } from './failure.ts';
import type { ClientOptions } from './program.ts';
import { abortOnSignals, howFar, stoppedEarly, watchOperation } from './watch.ts';

/**
 * Exit 0 when the operation completed or was cancelled, 130 on Ctrl-C (the operation goes on);
 * a stream that ended before the operation did is a failure saying how to follow it again.
 */
export async function opsWatch(operationId: string, options: ClientOptions): Promise<number> {
  const { baseUrl, apiKey } = apiTarget('ops watch', options);
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
