/** The one error `opspad/client` throws for a refused or failed call. */
import type { ErrorCode } from '../domain/errors.ts';

/**
 * `code` is opspad's own error code when the server answered (`validation_failed`, `not_found`,
 * `items_remaining`, …: see ErrorBody in /openapi.json), or one of the client's when it did not:
 * `network_error` (no answer), `timeout` (no answer in time) or `invalid_response` (an answer that
 * is not opspad's JSON, e.g. a proxy's error page).
 */
export type OpspadErrorCode = ErrorCode | 'network_error' | 'timeout' | 'invalid_response';

export class OpspadError extends Error {
  override readonly name = 'OpspadError';
  readonly code: OpspadErrorCode;
  /** The HTTP status; 0 when there was no answer. */
  readonly status: number;
  /** Structured facts about the error: the field at fault (`field`, `issues`), limits, ids. */
  readonly details: Readonly<Record<string, unknown>>;
  /** With 429: how long to wait before the next call, from Retry-After. */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    code: OpspadErrorCode,
    message: string,
    init: {
      status: number;
      details?: Readonly<Record<string, unknown>>;
      retryAfterSeconds?: number;
      cause?: unknown;
    },
  ) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = code;
    this.status = init.status;
    this.details = init.details ?? {};
    this.retryAfterSeconds = init.retryAfterSeconds;
  }
}
