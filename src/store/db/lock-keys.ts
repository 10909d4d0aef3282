/**
 * Every Postgres advisory lock opspad takes, in one list, so no two uses share a key by accident.
 *
 * - Session locks on one bigint key (held by a process across statements): the migrator's, one
 *   reconciler pass's, and opspad's DDL in a queue schema. BullMQ's own key is 0x42554c4c.
 * - Transaction locks on a class and `hashtext(subject)` (pg_advisory_xact_lock(int, int)):
 *   the background admission check per organization, the circuit breaker's window per
 *   operation, and the persistent notes of a conversation.
 * - Transaction locks of the Postgres queue backend's tables on one 64-bit hash of a subject
 *   naming the schema (queueLockSubject), so processes on different prefixes never wait for
 *   each other; they meet the keys above only by a hash collision.
 */

/** Session locks, `pg_advisory_lock(key)` / `pg_try_advisory_lock(key)`. */
export const SESSION_LOCK = {
  migration: 7_303_140_001,
  reconcile: 7_303_140_002,
  queueDdl: 7_303_140_003,
} as const;

/** Classes of the two-key transaction locks, `pg_advisory_xact_lock(class, hashtext(subject))`. */
export const XACT_LOCK_CLASS = {
  /** Subject: the organization id (assertBackgroundCapacity). */
  backgroundAdmission: 73031,
  /** Subject: the operation id (records of operations with max_failure_rate). */
  circuitBreaker: 73032,
  /** Subject: `<organization>:<conversation>` ("note" in ASCII). */
  persistentNotes: 0x6e6f7465,
  /** Subject: `<organization>:<conversation>`: writes to its own notes (the scope's cap). */
  conversationNotes: 0x6e6f7466,
} as const;

/**
 * The subject of a queue table's lock, `pg_advisory_xact_lock(hashtextextended(subject, 0))`:
 * `lease` for a capped lease key, `fair` for a queue's fair-share state, `limit` for one provider
 * limit key of a queue.
 */
export function queueLockSubject(schema: string, kind: 'lease' | 'fair' | 'limit', key: string): string {
  return `${schema}:${kind}:${key}`;
}
