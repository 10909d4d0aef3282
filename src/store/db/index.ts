/**
 * The connection to Postgres: one interface over a `pg` pool and an embedded PGlite
 * (db.ts), statements planned once per connection (prepared.ts), statements that go together
 * (batched.ts), and the migrations (migrate.ts: the committed drizzle/ folder, under an advisory
 * lock so concurrent starts run it once).
 *
 * Tables: none of its own (drizzle's migration journal).
 */
export * from './db.ts';
export * from './migrate.ts';
export * from './private-files.ts';
