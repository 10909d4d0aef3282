/**
 * `client.operations.results(id)`: an operation's results file read as it streams, one typed
 * item at a time (JSON Lines), and `resultsFile(id)`: the file itself, JSON Lines or CSV, as text
 * chunks to write somewhere. Either holds one chunk in memory, however many items there are;
 * breaking out of the loop closes the connection.
 */
import type { ItemResult, ResultFormat } from '../domain/item-results.ts';
import { OpspadError } from './errors.ts';
import { segment, type Transport } from './http.ts';

/** The media types of each format (the same as the server's, checked by the tests). */
const MEDIA_TYPES: Record<ResultFormat, string> = { jsonl: 'application/x-ndjson', csv: 'text/csv' };

export interface ResultsOptions {
  /** Only the failed items. */
  failed?: boolean;
  signal?: AbortSignal;
}

export interface ResultsFileOptions extends ResultsOptions {
  /** Default jsonl. */
  format?: ResultFormat;
}

/** The file's text, chunk by chunk, as it arrives. */
export async function* resultsFile(
  http: Transport,
  operationId: string,
  options: ResultsFileOptions = {},
): AsyncGenerator<string, void, undefined> {
  const format = options.format ?? 'jsonl';
  const response = await http.stream(
    {
      method: 'GET',
      path: `/v1/operations/${segment(operationId)}/results`,
      query: { format, status: options.failed ? 'failed' : undefined },
      signal: options.signal,
    },
    MEDIA_TYPES[format],
  );
  const body = response.body;
  if (!body) {
    return;
  }
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch (error) {
        if (options.signal?.aborted) {
          throw options.signal.reason;
        }
        throw new OpspadError('network_error', `the results of operation ${operationId} stopped before their end`, {
          status: 0,
          cause: error,
        });
      }
      if (next.done) {
        return;
      }
      yield next.value;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** Each item's result, in item order. */
export async function* results(
  http: Transport,
  operationId: string,
  options: ResultsOptions = {},
): AsyncGenerator<ItemResult, void, undefined> {
  let pending = '';
  for await (const chunk of resultsFile(http, operationId, { ...options, format: 'jsonl' })) {
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      yield JSON.parse(line) as ItemResult;
    }
  }
  if (pending.trim() !== '') {
    throw new OpspadError('invalid_response', `the results of operation ${operationId} end inside a line`, {
      status: 0,
    });
  }
}
