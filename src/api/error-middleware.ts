/**
 * The one place errors become HTTP responses: `{error: {code, message, details}}` with the
 * status the code maps to. Unexpected errors are logged with their stack and answered as a
 * plain 500 without internals.
 */
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { AppError, errorBody, httpStatusOf, toAppError } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
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

export function errorMiddleware(logger: Logger): ErrorRequestHandler {
  return (error, req, res, _next) => {
    const appError = fromRouter(error) ?? bodyParseError(error, req) ?? toAppError(error);
    if (appError.code === 'internal_error') {
      logger.error({ err: error, method: req.method, path: req.path }, 'request failed');
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
