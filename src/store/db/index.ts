/**
 * The connection to Postgres: one interface over a `pg` pool and an embedded PGlite
 * (db.ts), statements planned once per connection (prepared.ts), statements that go together
 * (batched.ts), the migrations (migrate.ts: the committed drizzle/ folder, then the server-side
 * functions' files, sql-functions.ts, under an advisory lock so concurrent starts run it once),
 * every advisory-lock key (lock-keys.ts), the Postgres errors opspad acts on (pg-errors.ts) and
 * the watch that tells when the server is gone (availability.ts).
 *
 * Tables: none of its own (drizzle's migration journal).
 *
 * Lock order: the migrator's session lock alone, held across the journal and the functions step.
 */
export * from './availability.ts';
export * from './db.ts';
export * from './lock-keys.ts';
export * from './migrate.ts';
export * from './pg-errors.ts';
export * from './private-files.ts';
