/**
 * `opspad demo`: a background operation of demo items end to end — on the running service if
 * there is one, else on one started here — with the live progress bar.
 *
 * Beside a running service it reads only what a client reads (and the database, for the key);
 * it reads and checks `opspad start`'s settings (the admin password among them) only when it
 * starts a service itself.
 */
import { randomUUID } from 'node:crypto';
import { BOARD_PATH } from '../api/board.ts';
import { OPERATIONS_PAGE_PATH } from '../api/operator-view/html.ts';
import { createLogger } from '../logger.ts';
import type { CreatedApiKey } from '../store/index.ts';
import { EXIT_CODES, UsageError } from './failure.ts';
import { keyCommand } from './keys.ts';
import { runKeyCommand } from './local-control.ts';
import { boardLine, startLocal } from './local-service.ts';
import { exitOnSignals, shutdownAndExit, shutdownInProgress } from './process-exit.ts';
import type { DemoOptions } from './program.ts';
import { settingsFor } from './settings.ts';
import {
  abortOnSignals,
  howFar,
  noAnswerProblem,
  refusedProblem,
  stoppedEarly,
  type WatchResult,
  watchOperation,
} from './watch.ts';

/** Exit 0 when the operation completed; -1 when the service started here keeps running. */
export async function demo(options: DemoOptions): Promise<number> {
  const config = settingsFor('demo');
  const { items, failureRate, latencyMs } = options;
  if (items > config.OPSPAD_MAX_ITEMS) {
    throw new UsageError(
      `--items ${items} is over the ${config.OPSPAD_MAX_ITEMS} items an operation may have (OPSPAD_MAX_ITEMS)`,
      `Give --items from 1 to ${config.OPSPAD_MAX_ITEMS}, or raise OPSPAD_MAX_ITEMS`,
    );
  }
  const baseUrl = (config.OPSPAD_URL ?? `http://${config.HOST}:${config.PORT}`).replace(/\/$/, '');
  const running = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(1000) }).then(
    (r) => r.ok,
    () => false,
  );
  // Starting a service here: its settings too, checked before anything opens.
  const serviceConfig = running ? undefined : settingsFor('start');
  // Logs would tear the progress bar apart: only warnings from a service started here.
  const logger = createLogger('warn');
  const stopping = { command: 'opspad demo', logger, timeoutMs: config.OPSPAD_SHUTDOWN_TIMEOUT };
  // A signal stops the service started here within the bound, as it stops `opspad start`.
  const signals = serviceConfig ? exitOnSignals(stopping) : undefined;
  const local = serviceConfig ? await startLocal(serviceConfig, logger, 'all') : undefined;
  if (local) {
    signals?.started(local.shutdownSteps);
  }
  const url = local?.opspad.url ?? baseUrl;
  const created = (await (local
    ? runKeyCommand(local.db, { op: 'create', org: 'demo' })
    : keyCommand(config, { op: 'create', org: 'demo' }))) as CreatedApiKey;
  const out = process.stdout;
  out.write(`${running ? 'Using the opspad running at' : 'Started opspad at'} ${url} (organization "demo").\n`);
  const response = await fetch(`${url}/v1/conversations/${randomUUID()}/tools/manage_assistant_operation`, {
    method: 'POST',
    headers: { authorization: `Bearer ${created.api_key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      action: 'create',
      operation_type: 'demo',
      execution: 'background',
      total_items: items,
      item_ids: Array.from({ length: items }, (_, i) => `demo-${i + 1}`),
      batch_size: 100,
      query_params: { latency_ms: latencyMs, failure_rate: failureRate },
      notes: 'opspad demo',
    }),
  }).catch((error: unknown) => {
    throw noAnswerProblem(url, error);
  });
  if (!response.ok) {
    throw await refusedProblem(url, 'the demo operation', response);
  }
  const body = (await response.json()) as { operation_id: string };
  out.write(
    `Operation ${body.operation_id}: ${items} items, ${failureRate * 100}% failing, ${latencyMs} ms per batch.\n`,
  );
  out.write(
    `${local ? boardLine(local.opspad) : `Bull Board: ${url}${BOARD_PATH}  (the running opspad's OPSPAD_ADMIN_USER and OPSPAD_ADMIN_PASSWORD)`}\n`,
  );
  out.write(`Operator view: ${url}${OPERATIONS_PAGE_PATH}\n\n`);
  // Beside a running service, Ctrl-C stops following (the operation goes on there); with a
  // service started here, it stops that service, whose event stream then ends.
  const interrupt = local ? undefined : abortOnSignals();
  const watched: WatchResult = await watchOperation({
    baseUrl: url,
    apiKey: created.api_key,
    operationId: body.operation_id,
    out,
    signal: interrupt?.signal,
  })
    .catch((error: unknown) => {
      if (shutdownInProgress()) {
        return { progress: undefined, end: 'shutting_down' } as const; // a signal closed the stream
      }
      throw error;
    })
    .finally(() => interrupt?.dispose());
  const last = watched.progress;
  if (watched.end === 'interrupted') {
    out.write(
      `\nInterrupted: operation ${body.operation_id} keeps running on the opspad at ${url} (${howFar(last)}); the operator view follows it: ${url}${OPERATIONS_PAGE_PATH}/${body.operation_id}\n`,
    );
    return EXIT_CODES.interrupted;
  }
  if (local && shutdownInProgress() && watched.end !== 'finished') {
    out.write(
      `\nInterrupted: opspad is stopping here, and operation ${body.operation_id} is left as it is (${howFar(last)}); it goes on when opspad starts again on the same database.\n`,
    );
    return shutdownInProgress() as Promise<never>;
  }
  const early = stoppedEarly(watched, {
    operationId: body.operation_id,
    baseUrl: url,
    followAgain: `${url}${OPERATIONS_PAGE_PATH}/${body.operation_id}`,
  });
  if (early) {
    throw early;
  }
  if (last) {
    out.write(
      `\nDone: ${last.completed_count} completed, ${last.failed_count} failed of ${last.total_items} (${last.status}).\n`,
    );
  }
  if (local && !options.exit && out.isTTY) {
    out.write('opspad keeps running so you can look around; Ctrl-C stops it.\n');
    return -1;
  }
  const code = last?.status === 'completed' ? 0 : 1;
  return local ? shutdownAndExit(local.shutdownSteps, { ...stopping, exitCode: code }) : code;
}
