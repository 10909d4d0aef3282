/**
 * The one error type opspad raises on purpose. Every error has a stable `code` a caller (or a
 * model) can branch on, a message that says what was wrong and what to do, and structured
 * `details`. HTTP status comes from the code, in one place: {@link httpStatusOf}.
 */

export const ERROR_CODES = {
  validation_failed: 400,
  invalid_json: 400,
  invalid_utf8: 400,
  invalid_body_encoding: 400,
  body_too_large: 413,
  body_stalled: 408,
  unknown_tool: 400,
  unknown_item_ids: 400,
  duplicate_item_ids: 400,
  too_many_items: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  no_active_operation: 404,
  operation_not_active: 409,
  operation_finished: 409,
  items_remaining: 409,
  nothing_to_retry: 409,
  items_pruned: 409,
  execution_ended: 409,
  version_conflict: 409,
  too_many_active_operations: 409,
  too_many_notes: 409,
  too_many_executions: 409,
  quota_exceeded: 409,
  rate_limited: 429,
  too_many_streams: 429,
  conflict: 409,
  service_unavailable: 503,
  internal_error: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export type ErrorDetails = Readonly<Record<string, unknown>>;

export class AppError extends Error {
  override readonly name = 'AppError';
  readonly code: ErrorCode;
  readonly details: ErrorDetails;

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.details = details;
  }
}

export function httpStatusOf(code: ErrorCode): number {
  return ERROR_CODES[code];
}

/** Normalises anything thrown into an {@link AppError}, keeping the original as `cause`. */
export function toAppError(error: unknown): AppError {
  if (error instanceof AppError) {
    return error;
  }
  return new AppError(
    'internal_error',
    'Internal error. Retry the call; if it keeps failing, report it (the server log has the details).',
    {},
    {
      cause: error,
    },
  );
}

/** The JSON body every error response has. */
export interface ErrorBody {
  error: { code: ErrorCode; message: string; details: ErrorDetails };
}

export function errorBody(error: AppError): ErrorBody {
  return { error: { code: error.code, message: error.message, details: error.details } };
}
