/**
 * The database watch on a server of its own that crashes and starts again: one `database
 * unreachable` line when it goes, a readiness check that names the outage meanwhile, one
 * `database reachable again` line (with how long) when it answers, and a pool that works again
 * without being reopened.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createPostgresDatabase, type PostgresDatabase, watchDatabase } from '../../src/store/index.ts';
import { type PostgresCluster, startPostgresCluster } from '../helpers/postgres-cluster.ts';
import { eventually } from '../helpers/wait.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) {
    await cleanup().catch(() => undefined);
  }
});

describe('the database watch', () => {
  it('says when Postgres is gone and when it is back, and the pool carries on', async () => {
    const cluster: PostgresCluster = await startPostgresCluster('watch');
    cleanups.push(cluster.remove);
    const db: PostgresDatabase = createPostgresDatabase({ connectionString: cluster.url, poolSize: 2 });
    cleanups.push(() => db.close());
    const messages: { msg: string; down_ms?: number }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        messages.push(JSON.parse(chunk.toString()) as { msg: string });
        done();
      },
    });
    const watch = watchDatabase(db, pino({ level: 'info' }, sink));
    cleanups.push(async () => watch.stop());
    db.pool.on('error', () => watch.probe());
    await watch.check();
    await db.query('SELECT 1'); // an idle pooled connection, which the crash then cuts

    cluster.crash();
    const refusal = await eventually(
      async () => {
        const error = await watch.check().then(
          () => undefined,
          (caught: unknown) => caught as Error,
        );
        return error && messages.some((m) => m.msg === 'database unreachable') ? error : undefined;
      },
      { what: 'the watch to see the server gone' },
    );
    expect(refusal.message).toMatch(/^the database is unreachable/);
    expect(messages.filter((m) => m.msg === 'database unreachable')).toHaveLength(1);

    cluster.start();
    await eventually(async () => (messages.some((m) => m.msg === 'database reachable again') ? true : undefined), {
      what: 'the watch to see the server back',
    });
    await watch.check();
    expect(await db.query<{ one: number }>('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    const back = messages.find((m) => m.msg === 'database reachable again');
    expect(back?.down_ms).toBeGreaterThan(0);
    expect(messages.filter((m) => m.msg === 'database unreachable')).toHaveLength(1);
  });
});
