/**
 * The Postgres schema BullMQ's tables live in, on the Postgres queue backend. It plays the part
 * the key prefix plays on Redis: deployments sharing one database, each with its own
 * OPSPAD_QUEUE_PREFIX, each get their own schema and never see each other's jobs.
 */
import { createHash } from 'node:crypto';

/** The schema of the embedded database (one deployment per data folder). */
export const EMBEDDED_QUEUE_SCHEMA = 'bullmq';
const MAX_IDENTIFIER = 63;

/**
 * `bullmq_<prefix>` when the prefix is already a plain lower-case identifier (the default
 * `opspad` gives `bullmq_opspad`); otherwise the prefix with other characters as `_`, then `_`
 * and 8 hex digits of its SHA-256, so `a.b` and `a-b` stay apart and the name fits in 63 bytes.
 */
export function queueSchemaFor(prefix: string): string {
  const plain = `bullmq_${prefix}`;
  if (/^[a-z0-9_]+$/.test(prefix) && plain.length <= MAX_IDENTIFIER) {
    return plain;
  }
  const hash = createHash('sha256').update(prefix).digest('hex').slice(0, 8);
  const readable = prefix.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  const head = `bullmq_${readable}`.slice(0, MAX_IDENTIFIER - hash.length - 1);
  return `${head}_${hash}`;
}

/** A schema name opspad made (letters, digits, `_`), quoted for SQL. */
export function quoteSchema(schema: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
    throw new Error(`not a schema name opspad makes: ${JSON.stringify(schema)}`);
  }
  return `"${schema}"`;
}
