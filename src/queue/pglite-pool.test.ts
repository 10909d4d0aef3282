/**
 * The `pg.Pool` look-alike over one PGlite instance: notifications reach the clients that
 * listen (and only them), a client's transaction holds every other query out and rolls back
 * when asked or when the client is released, names resolve in opspad's schema first and BullMQ's
 * second with no name in both, timers keep running while queries loop, and results look like
 * `pg`'s.
 */
import { runMigrations as runBullmqMigrations } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgliteDatabase, type PgliteDatabase, runMigrations } from '../store/index.ts';
import { createPglitePool, type PgliteNotification, type PglitePool } from './pglite-pool.ts';

describe('the PGlite pool adapter', () => {
  let db: PgliteDatabase;
  let pool: PglitePool;

  beforeAll(async () => {
    db = await createPgliteDatabase();
    await runMigrations(db);
    pool = await createPglitePool(db.pglite, 'bullmq');
  });
  afterAll(async () => {
    await pool.end();
    await db.close();
  });

  it('delivers a NOTIFY to the clients that LISTENed on its channel, and to no other', async () => {
    const [listener, other, bystander] = await Promise.all([pool.connect(), pool.connect(), pool.connect()]);
    const heard = { listener: [] as PgliteNotification[], other: [] as PgliteNotification[], bystander: 0 };
    listener.on('notification', (n) => heard.listener.push(n));
    other.on('notification', (n) => heard.other.push(n));
    bystander.on('notification', () => heard.bystander++);
    // As BullMQ sends it: a comment, then the statement.
    await listener.query('-- wake the workers\nLISTEN bullmq_jobs;\n');
    await other.query('LISTEN "Other"');

    await pool.query(`SELECT pg_notify('bullmq_jobs', 'batches-demo')`);
    await bystander.query(`NOTIFY "Other", 'x'`);
    await db.query(`SELECT pg_notify('bullmq_jobs', 'from opspad')`); // any session writer counts
    expect(heard.listener.map((n) => [n.channel, n.payload])).toEqual([
      ['bullmq_jobs', 'batches-demo'],
      ['bullmq_jobs', 'from opspad'],
    ]);
    expect(heard.other.map((n) => [n.channel, n.payload])).toEqual([['Other', 'x']]);
    expect(heard.bystander).toBe(0);

    await listener.query('UNLISTEN bullmq_jobs');
    await pool.query(`SELECT pg_notify('bullmq_jobs', 'late')`);
    expect(heard.listener).toHaveLength(2);
    other.release();
    await pool.query(`NOTIFY "Other", 'after release'`);
    expect(heard.other).toHaveLength(1);
    listener.release();
    bystander.release();
    expect(pool.checkedOut).toBe(0);
  });

  it("holds other queries out while a client's transaction is open, and commits or rolls back as told", async () => {
    await db.query('CREATE TABLE IF NOT EXISTS adapter_tx (n int)');
    const client = await pool.connect();
    await client.query('BEGIN');
    await client.query('INSERT INTO adapter_tx VALUES ($1)', [1]);
    let outsideDone = false;
    // Another query (opspad's own) waits for the COMMIT, then sees the row.
    const outside = db.query<{ n: number }>('SELECT count(*)::int AS n FROM adapter_tx').then((rows) => {
      outsideDone = true;
      return rows;
    });
    await client.query('INSERT INTO adapter_tx VALUES ($1)', [2]);
    expect(outsideDone).toBe(false);
    await client.query('COMMIT');
    expect(await outside).toEqual([{ n: 2 }]);

    await client.query('BEGIN');
    await client.query('INSERT INTO adapter_tx VALUES (3)');
    await client.query('ROLLBACK');
    // A statement that fails aborts the transaction; COMMIT then rolls back, as on a server.
    await client.query('BEGIN');
    await client.query('INSERT INTO adapter_tx VALUES (4)');
    await expect(client.query('SELECT no_such_column FROM adapter_tx')).rejects.toThrow(/no_such_column/);
    await client.query('COMMIT');
    // Released in the middle of a transaction: rolled back, and nothing stays blocked.
    await client.query('BEGIN');
    await client.query('INSERT INTO adapter_tx VALUES (5)');
    client.release();
    expect(await db.query('SELECT n FROM adapter_tx ORDER BY n')).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it('resolves opspad’s names first and BullMQ’s second, and no name is in both schemas', async () => {
    const client = await pool.connect();
    try {
      await runBullmqMigrations(client, 'bullmq');
    } finally {
      client.release();
    }
    // BullMQ's statements call its functions and read its tables by bare name…
    const [counts] = (await pool.query<{ n: string }>('SELECT count(*) AS n FROM job')).rows;
    expect(counts).toEqual({ n: '0' });
    // …while opspad's tables keep the first place for opspad's queries.
    expect(await db.query('SELECT count(*)::int AS n FROM organization')).toEqual([{ n: 0 }]);
    // Both work only while no relation, function or type of one schema shares a name with one
    // of the other: this fails the day a migration on either side adds one.
    const shared = await db.query<{ name: string }>(
      `WITH names AS (
         SELECT n.nspname AS schema, c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         UNION SELECT n.nspname, p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         UNION SELECT n.nspname, t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
       )
       SELECT a.name FROM names a JOIN names b ON a.name = b.name
       WHERE a.schema = 'public' AND b.schema = 'bullmq' ORDER BY 1`,
    );
    expect(shared).toEqual([]);
    const bullmqObjects = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'bullmq'`,
    );
    expect(bullmqObjects[0]?.n).toBeGreaterThan(10);
  });

  it('answers like pg: int8 as text, row counts, several statements without parameters', async () => {
    const { rows, rowCount } = await pool.query('SELECT 9007199254740993::int8 AS big, 2::int AS small');
    expect(rows).toEqual([{ big: '9007199254740993', small: 2 }]);
    expect(rowCount).toBe(1);
    const multi = await pool.query(
      'CREATE TEMP TABLE adapter_multi (n int); INSERT INTO adapter_multi VALUES (1), (2)',
    );
    expect(multi.rowCount).toBe(2);
    const updated = await pool.query('UPDATE adapter_multi SET n = n + $1', [10]);
    expect(updated.rowCount).toBe(2);
  });

  it('lets timers run while a client queries in a tight loop', async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    try {
      const started = Date.now();
      // Bounded either way: 50 ms of back-to-back queries, or 20,000 of them.
      for (let i = 0; i < 20_000 && Date.now() - started < 50; i++) {
        await pool.query('SELECT 1');
      }
    } finally {
      clearInterval(timer);
    }
    expect(ticks).toBeGreaterThan(0);
  });

  it('refuses queries once ended, with the message BullMQ recognises, and leaves PGlite open', async () => {
    const second = await createPglitePool(db.pglite, 'bullmq');
    const held = await second.connect();
    await held.query('LISTEN ended_channel');
    await second.end();
    await expect(second.query('SELECT 1')).rejects.toThrow('Cannot use a pool after calling end on the pool');
    expect(second.checkedOut).toBe(0);
    expect(await db.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
  });
});
