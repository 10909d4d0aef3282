/** Error codes most routes share, for the route table. */
import type { ErrorCode } from '../../domain/errors.ts';

/** Every /v1 route: a key, the per-key limit, and opspad's own failures. */
export const V1_ERRORS: readonly ErrorCode[] = ['unauthorized', 'rate_limited', 'internal_error'];
/** Routes that read a JSON body. */
export const BODY_ERRORS: readonly ErrorCode[] = ['validation_failed', 'invalid_json', 'body_too_large'];
