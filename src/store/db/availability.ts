/**
 * Whether Postgres answers, as this process sees it. A crash, a restart or a failover makes
 * every query fail for a while; the pools reconnect by themselves, the workers' jobs retry, and
 * this watch is what tells the operator: one `database unreachable` log line when the server
 * goes, one `database reachable again` (with how long it was gone) when it answers, and a
 * readiness check that names the outage. While the server is gone it probes with backoff, so a
 * process waiting for it costs the server nothing but one connection attempt now and then.
 */
import type { Logger } from '../../logger.ts';
import type { Queryable } from './db.ts';

/** A probe while the server answers; a lost idle connection probes at once. */
const UP_PROBE_MS = 2000;
/** The backoff while it is gone: from the first to the last, doubling. */
const DOWN_PROBE_FIRST_MS = 200;
const DOWN_PROBE_MAX_MS = 3000;

export interface DatabaseWatch {
  /** For `/readyz`: resolves when the server answers, throws a message naming the outage otherwise. */
  check(): Promise<void>;
  /** Probes now (a connection was lost): the log says so without waiting for the next probe. */
  probe(): void;
  stop(): void;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message || error.constructor.name : String(error);
}

export function watchDatabase(db: Queryable, logger: Logger): DatabaseWatch {
  let downSince: number | undefined;
  let lastError = '';
  let delay = DOWN_PROBE_FIRST_MS;
  let timer: NodeJS.Timeout | undefined;
  let probing = false;
  let stopped = false;

  const schedule = () => {
    clearTimeout(timer);
    if (stopped) {
      return;
    }
    timer = setTimeout(probe, downSince === undefined ? UP_PROBE_MS : delay);
    timer.unref();
  };

  const probeOnce = async () => {
    try {
      await db.query('SELECT 1');
      if (downSince !== undefined) {
        logger.info({ down_ms: Date.now() - downSince }, 'database reachable again');
        downSince = undefined;
        delay = DOWN_PROBE_FIRST_MS;
      }
    } catch (error) {
      lastError = messageOf(error);
      if (downSince === undefined) {
        downSince = Date.now();
        logger.warn({ err: lastError }, 'database unreachable');
      } else {
        delay = Math.min(delay * 2, DOWN_PROBE_MAX_MS);
      }
    }
  };

  function probe(): void {
    if (probing) {
      return;
    }
    probing = true;
    void probeOnce().finally(() => {
      probing = false;
      schedule();
    });
  }

  schedule();
  return {
    async check() {
      if (downSince !== undefined) {
        throw new Error(
          `the database is unreachable since ${new Date(downSince).toISOString()} (${lastError}); opspad retries with backoff and carries on when it answers`,
        );
      }
      try {
        await db.query('SELECT 1');
      } catch (error) {
        probe();
        throw new Error(`the database is unreachable (${messageOf(error)})`);
      }
    },
    probe,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
