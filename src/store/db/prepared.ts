/**
 * Statements Postgres plans once per connection: named prepared statements, for the few that run
 * on every turn of a conversation or every batch of a worker.
 *
 * An unnamed statement is parsed and planned on each call, and for the statements an assistant's
 * turn sends, planning costs more than running them (`EXPLAIN (ANALYZE)` shows both). Named, each
 * is parsed once per connection, and after its first five runs Postgres keeps a generic plan when
 * it costs no more than the custom ones.
 *
 * Only statements whose best plan does not depend on their parameters belong here — probes by
 * key, inserts, the one-round-trip calls (whose own statements plpgsql caches already). A
 * statement over an operation's items, whose plan depends on the operation's size, stays
 * unnamed and planned for its parameters each time. Through a pooler in transaction mode
 * (`DATABASE_DIRECT_URL` set) nothing is named: a statement prepared on one server connection
 * would be run on another.
 *
 * Postgres re-plans a prepared statement when a table or function it uses changes, but refuses
 * one whose result columns changed ("cached plan must not change result type"): the marked
 * statements name their columns, and a migration that changes what a step function returns
 * gives it a new name (a new statement text) rather than replacing it.
 */
import { createHash } from 'node:crypto';

const NAMES = new Map<string, string>();

/** Marks `text` as a statement to prepare once per connection (see above); returns it unchanged. */
export function prepared(text: string): string {
  if (!NAMES.has(text)) {
    NAMES.set(text, `opspad_${createHash('sha256').update(text).digest('hex').slice(0, 20)}`);
  }
  return text;
}

/** The name `text` runs under, or undefined when it is not marked. */
export function preparedName(text: string): string | undefined {
  return NAMES.get(text);
}
