/**
 * The one place errors become HTTP responses: `{error: {code, message, details}}` with the
 * status the code maps to. Unexpected errors are logged with their stack and answered as a
 * plain 500 without internals.
 */
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { AppError, errorBody, httpStatusOf, toAppError } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
import { isDatabaseGone } from '../store/index.ts';
import { bodyParseError } from './json-body.ts';

/** The router could not percent-decode a path parameter (e.g. `%E0%A4%A`): the caller's mistake. */
function fromRouter(error: unknown): AppError | null {
  if (error instanceof URIError && (error as { status?: unknown }).status === 400) {
    return new AppError('validation_failed', 'The request path is not valid percent-encoded UTF-8.', {
      field: '(path)',
    });
  }
  return null;
}

/** Seconds a client is told to wait when the database is gone: a restart or a failover takes a few. */
const RETRY_AFTER_WHEN_GONE_S = 5;

/**
 * Postgres is gone (crashed, restarting, failing over): a 503 the caller can act on, not a 500.
 * Its transaction did not commit (unless the server went during the COMMIT itself: a retried
 * create then finds the operation it made).
 */
function fromDatabase(error: unknown): AppError | null {
  // The body reader's errors (typed by raw-body) are the client's connection, not the database's.
  if (typeof (error as { type?: unknown } | null)?.type === 'string') {
    return null;
  }
  const cause = error instanceof AppError ? error.cause : undefined;
  if (!isDatabaseGone(error) && !isDatabaseGone(cause)) {
    return null;
  }
  return new AppError(
    'service_unavailable',
    `The database is unreachable (restarting or failing over). Retry the call in ${RETRY_AFTER_WHEN_GONE_S} seconds.`,
    { retry_after_seconds: RETRY_AFTER_WHEN_GONE_S },
  );
}

export function errorMiddleware(logger: Logger): ErrorRequestHandler {
  return (error, req, res, _next) => {
    const gone = fromDatabase(error);
    // Before the body's errors: a lost connection's socket error looks like a decompressor's.
    const appError = fromRouter(error) ?? gone ?? bodyParseError(error, req) ?? toAppError(error);
    if (appError.code === 'internal_error') {
      logger.error({ err: error, method: req.method, path: req.path }, 'request failed');
    }
    if (gone && !res.headersSent) {
      res.setHeader('Retry-After', String(RETRY_AFTER_WHEN_GONE_S));
    }
    if (res.headersSent) {
      res.end(); // a stream that failed midway: nothing more can be said
      return;
    }
    res.status(httpStatusOf(appError.code)).json(errorBody(appError));
  };
}

export const notFoundHandler: RequestHandler = (req, res) => {
  const error = new AppError('not_found', `No route ${req.method} ${req.path}.`, { path: req.path });
  res.status(404).json(errorBody(error));
};
