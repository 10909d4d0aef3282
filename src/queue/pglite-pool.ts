/**
 * A `pg.Pool` look-alike over the one embedded PGlite instance opspad already has open, so
 * BullMQ's PostgreSQL backend runs in the same process and database as opspad's tables, with
 * nothing to install. PGlite is a single session without a wire protocol; this adapter makes it
 * behave like a pool of connections in the four ways BullMQ relies on:
 *
 * - NOTIFY reaches the clients that LISTENed. PGlite delivers every notification to its one
 *   session; the adapter keeps who listens to what and hands each notification to those clients
 *   (`@electric-sql/pglite-socket` delivers it to the sender, so idle workers slept until their
 *   timeout).
 * - A client's BEGIN … COMMIT holds every other query out: it runs as a PGlite transaction,
 *   which other queries (opspad's too) wait behind, as they would wait for row locks.
 * - Names resolve: the session's `search_path` is `public, <schema>`. BullMQ's operation
 *   functions pin their own path (`SET search_path FROM CURRENT`); only the statements that call
 *   them use the session's, and opspad's tables keep the first place. That is correct while no
 *   name exists in both schemas: `pglite-pool.test.ts` fails the day one does.
 * - Timers keep running: each query first yields to the event loop. PGlite answers in the same
 *   turn, so a worker polling an empty queue would otherwise starve every timer of the process
 *   (a global-concurrency poll loop pinned a core for 10 minutes without it).
 *
 * Result shapes follow `pg`: `{rows, rowCount}`, int8 as a string. A query without parameters
 * may hold several statements (BullMQ's migrations are one text each), as with `pg`'s simple
 * protocol.
 */
import { EventEmitter } from 'node:events';
import type { PGlite, Results, Transaction } from '@electric-sql/pglite';

export interface PgliteQueryResult<R = Record<string, unknown>> {
  rows: R[];
  rowCount: number;
}

export interface PgliteNotification {
  channel: string;
  payload?: string;
  processId?: number;
}

/** What BullMQ's backend uses of a checked-out `pg` client. */
export interface PglitePoolClient {
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<PgliteQueryResult<R>>;
  release(destroy?: boolean | Error): void;
  on(event: 'notification', listener: (message: PgliteNotification) => void): this;
  on(event: 'error', listener: (error: Error) => void): this;
  on(event: 'end', listener: () => void): this;
  removeListener(event: 'notification', listener: (message: PgliteNotification) => void): this;
  removeAllListeners(event?: string): this;
}

/** What BullMQ's backend uses of a `pg.Pool`. */
export interface PglitePool {
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<PgliteQueryResult<R>>;
  connect(): Promise<PglitePoolClient>;
  end(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): this;
  on(event: 'connect', listener: (client: PglitePoolClient) => void): this;
  removeAllListeners(event?: string): this;
  /** Clients checked out and not released (tests: nothing leaks). */
  readonly checkedOut: number;
}

/** `pg`'s message, which BullMQ recognises to ignore a query raced in during its own close. */
const ENDED_MESSAGE = 'Cannot use a pool after calling end on the pool';
const INT8_OID = 20;
/** int8 as text, as `pg` returns it (PGlite would return a number). */
const QUERY_OPTIONS = { parsers: { [INT8_OID]: (value: string) => value } };

const BEGIN = /^\s*(?:BEGIN|START\s+TRANSACTION)\b\s*(?:WORK\b|TRANSACTION\b)?\s*(.*?)\s*;?\s*$/is;
const COMMIT = /^\s*(?:COMMIT|END)\b\s*(?:WORK|TRANSACTION)?\s*;?\s*$/i;
const ROLLBACK = /^\s*(?:ROLLBACK|ABORT)\b\s*(?:WORK|TRANSACTION)?\s*;?\s*$/i;
const LISTEN = /^\s*(UN)?LISTEN\s+("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*|\*)\s*;?\s*$/i;

/** A channel as Postgres names it: unquoted identifiers fold to lower case. */
function channelName(token: string): string {
  return token.startsWith('"') ? token.slice(1, -1).replaceAll('""', '"') : token.toLowerCase();
}

function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** The statement without the comments before it (BullMQ's command files open with some). */
function statementOf(text: string): string {
  return text.replace(/^(?:\s+|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*/, '');
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

function toResult(results: Results | Results[]): PgliteQueryResult {
  const last = Array.isArray(results) ? results[results.length - 1] : results;
  const rows = (last?.rows ?? []) as Record<string, unknown>[];
  return { rows, rowCount: last?.affectedRows ? last.affectedRows : rows.length };
}

async function run(
  target: Pick<PGlite, 'query' | 'exec'> | Transaction,
  text: string,
  params?: readonly unknown[],
): Promise<PgliteQueryResult> {
  // No parameters: the simple protocol, which takes several statements (as `pg` does).
  if (!params || params.length === 0) {
    return toResult(await target.exec(text, QUERY_OPTIONS));
  }
  return toResult(await target.query(text, params as unknown[], QUERY_OPTIONS));
}

/** An open transaction of one client: its PGlite transaction and how to end it. */
interface OpenTransaction {
  tx: Transaction;
  end(outcome: 'commit' | 'rollback'): Promise<PgliteQueryResult>;
}

async function beginTransaction(pglite: PGlite, options: string): Promise<OpenTransaction> {
  let settle: (outcome: 'commit' | 'rollback') => void = () => {};
  const outcome = new Promise<'commit' | 'rollback'>((resolve) => {
    settle = resolve;
  });
  let opened: (tx: Transaction) => void = () => {};
  let failed: (error: unknown) => void = () => {};
  const ready = new Promise<Transaction>((resolve, reject) => {
    opened = resolve;
    failed = reject;
  });
  const done = pglite.transaction(async (tx) => {
    if (options) {
      await tx.exec(`SET TRANSACTION ${options}`);
    }
    opened(tx);
    if ((await outcome) === 'rollback') {
      await tx.rollback();
    }
  });
  done.catch(failed); // BEGIN (or SET TRANSACTION) itself failed
  const tx = await ready;
  return {
    tx,
    async end(how) {
      settle(how);
      try {
        await done;
        return { rows: [], rowCount: 0 };
      } catch (error) {
        // COMMIT of a transaction a failed statement aborted rolls back, as on a server.
        // (PGlite's TransactionAbortedError, SQLSTATE 25P02.)
        if (how === 'commit' && (error as { code?: string }).code === '25P02') {
          return { rows: [], rowCount: 0 };
        }
        throw error;
      }
    },
  };
}

class PgliteClient extends EventEmitter implements PglitePoolClient {
  private open: OpenTransaction | undefined;
  readonly channels = new Set<string>();
  released = false;

  constructor(
    private readonly pool: PglitePoolImpl,
    private readonly pglite: PGlite,
  ) {
    super();
  }

  async query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<PgliteQueryResult<R>> {
    return (await this.execute(text, params)) as PgliteQueryResult<R>;
  }

  private async execute(text: string, params?: readonly unknown[]): Promise<PgliteQueryResult> {
    if (this.released) {
      throw new Error('Client was released to the pool: check out another one');
    }
    await yieldToEventLoop();
    const statement = statementOf(text);
    const begin = BEGIN.exec(statement);
    if (begin) {
      if (this.open) {
        return { rows: [], rowCount: 0 }; // Postgres warns and carries on
      }
      this.open = await beginTransaction(this.pglite, begin[1] ?? '');
      return { rows: [], rowCount: 0 };
    }
    const ending = COMMIT.test(statement) ? 'commit' : ROLLBACK.test(statement) ? 'rollback' : undefined;
    if (ending) {
      const open = this.open;
      this.open = undefined;
      return open ? open.end(ending) : { rows: [], rowCount: 0 };
    }
    const listen = LISTEN.exec(statement);
    if (listen && (!params || params.length === 0)) {
      const [, un, token = ''] = listen;
      if (un) {
        await this.pool.unlisten(this, token === '*' ? undefined : channelName(token));
      } else {
        await this.pool.listen(this, channelName(token));
      }
      return { rows: [], rowCount: 0 };
    }
    return run(this.open?.tx ?? this.pglite, text, params);
  }

  release(): void {
    if (this.released) {
      return;
    }
    this.released = true;
    // A client handed back mid-transaction must not hold everything else out forever.
    const open = this.open;
    this.open = undefined;
    void open?.end('rollback').catch(() => {});
    void this.pool.detach(this);
  }
}

class PglitePoolImpl extends EventEmitter implements PglitePool {
  private readonly subscribers = new Map<string, Set<PgliteClient>>();
  private readonly clients = new Set<PgliteClient>();
  private readonly stopNotifications: () => void;
  private ended = false;

  constructor(private readonly pglite: PGlite) {
    super();
    this.stopNotifications = pglite.onNotification((channel, payload) => {
      for (const client of this.subscribers.get(channel) ?? []) {
        client.emit('notification', { channel, payload, processId: 0 } satisfies PgliteNotification);
      }
    });
  }

  get checkedOut(): number {
    return this.clients.size;
  }

  private assertOpen(): void {
    if (this.ended) {
      throw new Error(ENDED_MESSAGE);
    }
  }

  async query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<PgliteQueryResult<R>> {
    this.assertOpen();
    await yieldToEventLoop();
    return (await run(this.pglite, text, params)) as PgliteQueryResult<R>;
  }

  async connect(): Promise<PglitePoolClient> {
    this.assertOpen();
    const client = new PgliteClient(this, this.pglite);
    this.clients.add(client);
    this.emit('connect', client);
    return client;
  }

  async listen(client: PgliteClient, channel: string): Promise<void> {
    let set = this.subscribers.get(channel);
    if (!set) {
      set = new Set();
      this.subscribers.set(channel, set);
      // The session listens once per channel, whoever asked first.
      await this.pglite.exec(`LISTEN ${quoteIdentifier(channel)}`);
    }
    set.add(client);
    client.channels.add(channel);
  }

  async unlisten(client: PgliteClient, channel: string | undefined): Promise<void> {
    for (const name of channel === undefined ? [...client.channels] : [channel]) {
      client.channels.delete(name);
      const set = this.subscribers.get(name);
      set?.delete(client);
      if (set && set.size === 0) {
        this.subscribers.delete(name);
        if (!this.pglite.closed) {
          await this.pglite.exec(`UNLISTEN ${quoteIdentifier(name)}`).catch(() => {});
        }
      }
    }
  }

  async detach(client: PgliteClient): Promise<void> {
    this.clients.delete(client);
    client.removeAllListeners('notification');
    await this.unlisten(client, undefined);
  }

  async end(): Promise<void> {
    if (this.ended) {
      return;
    }
    this.ended = true;
    for (const client of [...this.clients]) {
      client.release();
    }
    this.stopNotifications();
  }
}

/**
 * A pool over `pglite` whose unqualified names resolve in `public`, then `schema`. PGlite stays
 * open when the pool ends: the store owns it.
 */
export async function createPglitePool(pglite: PGlite, schema: string): Promise<PglitePool> {
  await pglite.exec(`SET search_path TO public, ${quoteIdentifier(schema)}`);
  return new PglitePoolImpl(pglite);
}
