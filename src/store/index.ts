/**
 * The store: everything opspad keeps in Postgres, by what it owns. Every other layer imports it
 * through this file; each folder's index.ts says what it owns, its tables and its lock order.
 *
 * - db/: the connection (pool or PGlite), prepared and batched statements, migrations
 * - tenants/: organizations, API keys, webhook secrets, conversations
 * - operations/: operations and their items, their actions, events and reads
 * - leases/: leases and records of items, the step functions, worker demand
 * - scratchpads/: the structured pad, notes, traces, context renders
 * - retention/: pruning what is past keeping (run by the reconciler)
 * - mcp-access/: the sessions of /mcp and the OAuth clients, grants and tokens
 */
export * from './db/index.ts';
export * from './leases/index.ts';
export * from './mcp-access/index.ts';
export * from './operations/index.ts';
export * from './retention/index.ts';
export * from './scratchpads/index.ts';
export * from './tenants/index.ts';
