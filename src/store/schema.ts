/**
 * The Postgres schema, as drizzle tables: each folder declares the tables it owns in its own
 * schema.ts, and this file gathers them for drizzle-kit (drizzle.config.ts). `npm run
 * db:generate` turns changes in any of them into a new migration under drizzle/; migrations are
 * append-only once committed.
 */
export * from './leases/schema.ts';
export * from './mcp-access/schema.ts';
export * from './operations/schema.ts';
export * from './retention/schema.ts';
export * from './scratchpads/schema.ts';
export * from './tenants/schema.ts';
