/**
 * Postgres error identities opspad acts on, recognised in one place: a driver error (pg or
 * PGlite) carries the SQLSTATE in `code` and, for a constraint, its name in `constraint` (PGlite
 * and some poolers only in the message).
 */

/** SQLSTATE of a unique index refusing a row. */
export const UNIQUE_VIOLATION = '23505';
/** SQLSTATE of a deadlock Postgres broke by failing one transaction. */
export const DEADLOCK_DETECTED = '40P01';
/** SQLSTATE of a serializable transaction that lost to a concurrent one. */
export const SERIALIZATION_FAILURE = '40001';
/** Raised by the record step functions when an id of the report was not recordable. */
export const NOT_ALL_RECORDABLE = 'OPS01';
/** Raised by opspad_reserve_quota: the organization's quota refuses the new operation (DETAIL: figures). */
export const QUOTA_REFUSED = 'OPS02';
/** Raised by opspad_assert_background_capacity: the background limit refuses it (DETAIL: figures). */
export const BACKGROUND_LIMIT_REFUSED = 'OPS03';

/** The unique indexes whose refusals mean something to the caller. */
export const UNIQUE_INDEX = {
  /** An item id repeated within one operation. */
  itemId: 'uq_assistant_operation_item_id',
  /** A second active operation in one conversation. */
  oneActiveOperation: 'uq_assistant_operation_one_active',
} as const;

function fieldsOf(error: unknown): { code?: unknown; constraint?: unknown; message?: unknown } {
  return (error ?? {}) as { code?: unknown; constraint?: unknown; message?: unknown };
}

/** Whether `error` is the unique index `index` refusing a row. */
export function isUniqueViolation(error: unknown, index: (typeof UNIQUE_INDEX)[keyof typeof UNIQUE_INDEX]): boolean {
  const { code, constraint, message } = fieldsOf(error);
  return code === UNIQUE_VIOLATION && (constraint === index || String(message).includes(index));
}

/** Whether `error` is a deadlock Postgres broke. */
export function isDeadlock(error: unknown): boolean {
  return fieldsOf(error).code === DEADLOCK_DETECTED;
}

/** A deadlock or serialization failure: the transaction may simply run again. */
export function isRetryableConflict(error: unknown): boolean {
  const { code } = fieldsOf(error);
  return code === DEADLOCK_DETECTED || code === SERIALIZATION_FAILURE;
}

/** The SQLSTATE of a driver error, when it has one. */
export function sqlStateOf(error: unknown): string | undefined {
  const { code } = fieldsOf(error);
  return typeof code === 'string' ? code : undefined;
}

/** Node's errors of a connection that could not be made or was cut. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND']);
/**
 * SQLSTATEs of a server going away or not being the primary any more: shutting down (57P01,
 * 57P02 crash, 57P03 starting up), connection exceptions (class 08), and a write on a node a
 * failover just demoted (25006).
 */
const GONE_STATES = new Set(['57P01', '57P02', '57P03', '25006']);

/**
 * Whether `error` says the server is gone (crashed, restarting, failing over) rather than that
 * the statement was wrong: the call may be retried once it is back.
 */
export function isDatabaseGone(error: unknown): boolean {
  const { code, message } = fieldsOf(error);
  if (typeof code === 'string' && (SOCKET_CODES.has(code) || GONE_STATES.has(code) || code.startsWith('08'))) {
    return true;
  }
  // node-postgres reports a connection lost mid-query without a code.
  return (
    typeof message === 'string' && /^Connection terminated|^Client has encountered a connection error/.test(message)
  );
}
