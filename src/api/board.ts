/**
 * Bull Board at /admin/queues: every opspad queue, each job's progress and log lines (which
 * operation, how far), behind basic auth. Read-only mode hides its buttons (Bull Board's
 * `readOnlyMode`); the server refuses the changes themselves (operator-guard.ts).
 *
 * What opspad adds to the board:
 * - A batch queue is shown, and addressed (`/admin/queues/queue/<type>`), by its operation type
 *   rather than its BullMQ name (`batches-<type>`), unless another queue already has that name.
 * - A job is a batch: items fail inside a job that succeeds (BullMQ retrying it would redo the
 *   items that went through). So the job's name says how many of its items failed, its return
 *   value has the counts, each queue's description counts the items its operations failed
 *   lately (from Postgres, the source of truth), and each job links to its operation in the
 *   operator view.
 * - On the Postgres queue backend, a queue's workers are the worker processes registered in the
 *   fair share (BullMQ finds workers by the names of their connections, which opspad's workers
 *   there share: postgres-backend.ts), instead of "No workers" while jobs run.
 * - The board's page loads nothing from elsewhere: its link to a web font service is taken out
 *   of the HTML (the fonts fall back to the system's), and a visible link leads to the operator
 *   view.
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import type { Express, RequestHandler, Router } from 'express';
import { batchQueueName } from '../queue/catalog.ts';
import type { FairRegistration } from '../queue/fair-share-store.ts';
import { OPERATIONS_PAGE_PATH } from './operator-view/html.ts';

export const BOARD_PATH = '/admin/queues';
const BATCH_QUEUE_PREFIX = batchQueueName('');
/** The failed-items count on each queue looks this far back (BullMQ keeps failed jobs as long). */
export const FAILED_ITEMS_DAYS = 7;
/**
 * How long one count of failed items serves every queue and every viewer: the board's own poll
 * interval, so however many boards are open, the count (a scan of the operations table) is read
 * at most once per poll.
 */
const FAILED_ITEMS_CACHE_MS = 5000;

/** Items failed per operation type, in operations updated within the last `days`. */
export type FailedItemsByType = (days: number) => Promise<Map<string, { items: number; operations: number }>>;

/** The operation type a batch queue runs, or null for other queues. */
export function operationTypeOfQueue(queueName: string): string | null {
  return queueName.startsWith(BATCH_QUEUE_PREFIX) ? queueName.slice(BATCH_QUEUE_PREFIX.length) : null;
}

/** The counts of failed items, read at most once per {@link FAILED_ITEMS_CACHE_MS} for all queues. */
function failedItemsCache(read: FailedItemsByType | undefined) {
  let value = new Map<string, { items: number; operations: number }>();
  let readAt = 0;
  let reading: Promise<void> | null = null;
  return {
    get: (type: string) => value.get(type),
    async refresh(): Promise<void> {
      if (!read || Date.now() - readAt < FAILED_ITEMS_CACHE_MS) {
        return;
      }
      reading ??= read(FAILED_ITEMS_DAYS)
        .then((fresh) => {
          value = fresh;
          readAt = Date.now();
        })
        // The board keeps working without the count; it is tried again on the next poll.
        .catch(() => {})
        .finally(() => {
          reading = null;
        });
      await reading;
    },
  };
}

type FailedItems = ReturnType<typeof failedItemsCache>;

interface BatchResult {
  leased?: number;
  completed?: number;
  failed?: number;
}

/** The name a batch job shows: its outcome once it ran, its place in the lane before. */
export function batchJobName(job: { name?: string; returnvalue?: unknown; data?: Record<string, unknown> }): string {
  const result = (job.returnvalue ?? null) as BatchResult | null;
  const name = job.name ?? '';
  if (result && typeof result === 'object' && typeof result.leased === 'number') {
    if ((result.failed ?? 0) > 0) {
      return `${name} · ${result.failed} of ${result.leased} items failed`;
    }
    return result.leased > 0
      ? `${name} · ${result.completed ?? 0} of ${result.leased} items completed`
      : `${name} · nothing left`;
  }
  const { lane, seq } = job.data ?? {};
  return typeof lane === 'number' && typeof seq === 'number' ? `${name} · lane ${lane} step ${seq}` : name;
}

/** A batch queue, named and described by its operation type. */
class BatchQueueAdapter extends BullMQAdapter {
  constructor(
    queue: Queue,
    private readonly operationType: string,
    private readonly shownName: string,
    private readonly failed: FailedItems,
    options: { readOnlyMode: boolean; allowRetries: boolean },
  ) {
    super(queue, {
      ...options,
      externalJobUrl: (job) => {
        const operationId = (job.data as { operation_id?: unknown } | undefined)?.operation_id;
        return typeof operationId === 'string' && /^[0-9a-f-]{36}$/i.test(operationId)
          ? { displayText: 'Operation ›', href: `${OPERATIONS_PAGE_PATH}/${operationId}` }
          : undefined;
      },
    } as ConstructorParameters<typeof BullMQAdapter>[1]);
    this.setFormatter('name', batchJobName);
  }

  override getName(): string {
    return this.shownName;
  }

  override getDescription(): string {
    const failed = this.failed.get(this.operationType);
    const failures = failed
      ? `${failed.items.toLocaleString('en-US')} item(s) failed in ${failed.operations} operation(s) in the last ${FAILED_ITEMS_DAYS} days`
      : `no item failed in the last ${FAILED_ITEMS_DAYS} days`;
    // The count first: the board shows the description's start on one line.
    return `${failures[0]?.toUpperCase()}${failures.slice(1)} (recorded on their operations, not as failed jobs: see ${OPERATIONS_PAGE_PATH}). Batches of "${this.operationType}" operations, BullMQ queue ${this.getQueueName()}.`;
  }

  override async getJobCounts() {
    const [counts] = await Promise.all([super.getJobCounts(), this.failed.refresh()]);
    return counts;
  }
}

/** The board's page without requests to other hosts, and with the way to the operator view. */
export function localOnly(html: string): string {
  return html
    .replace(/<link\b[^>]*\bhref=["']?(?:https?:)?\/\/[^>]*>\s*/gi, '')
    .replace(
      '</body>',
      `<a href="${OPERATIONS_PAGE_PATH}" style="position:fixed;right:16px;bottom:12px;z-index:1000;padding:6px 12px;border-radius:6px;background:#2563eb;color:#fff;font:600 13px system-ui,sans-serif;text-decoration:none;box-shadow:0 1px 4px rgba(0,0,0,.3)">Operations ›</a></body>`,
    );
}

/** Worker processes by batch queue (every batch queue's when null): see QueueBackend.registeredWorkers. */
export type RegisteredWorkers = (queueName: string | null) => Promise<FairRegistration[]>;
type BoardWorkers = NonNullable<Awaited<ReturnType<BullMQAdapter['getWorkers']>>>;

/**
 * A registered worker process as the board lists it: its id is `<host>:<pid>:<started, epoch
 * ms>:<random>` (worker-pool.ts), so the board shows the pid (and its slots on a batch queue),
 * the host, and since when.
 */
export function boardWorker(
  registration: FairRegistration,
  withSlots: boolean,
  now = Date.now(),
): BoardWorkers[number] {
  const match = /^(.*):(\d+):(\d+):[0-9a-f]+$/.exec(registration.id);
  const slots = withSlots ? ` · ${registration.slots} slots` : '';
  return {
    id: registration.id,
    name: match ? `pid ${match[2]}${slots}` : `${registration.id}${slots}`,
    addr: match?.[1] ?? '',
    age: match ? Math.max(0, Math.round((now - Number(match[3])) / 1000)) : 0,
  };
}

/** Lists `queueName`'s workers from their registrations instead of BullMQ's connection names. */
function listRegisteredWorkers<Adapter extends BullMQAdapter>(
  adapter: Adapter,
  registered: RegisteredWorkers | undefined,
  queueName: string | null,
): Adapter {
  if (registered) {
    // Every process that runs workers runs every queue's: one not in the fair share lists them all.
    adapter.getWorkers = async () =>
      (await registered(queueName)).map((registration) => boardWorker(registration, queueName !== null));
  }
  return adapter;
}

type Render = (path: string, options: object, callback: (error: Error | null, html?: string) => void) => void;

/** The name the board shows for each queue: a batch queue's operation type, unless taken. */
export function boardQueueNames(queues: readonly Queue[]): Map<string, string> {
  const taken = new Set(queues.map((q) => q.name));
  return new Map(
    queues.map((queue) => {
      const type = operationTypeOfQueue(queue.name);
      return [queue.name, type && !taken.has(type) ? type : queue.name];
    }),
  );
}

/**
 * Links to a batch queue by its BullMQ name (`/queue/batches-demo`, as the board had them) lead
 * to its page under its new name.
 */
export function redirectRenamedQueues(queues: readonly Queue[]): RequestHandler {
  const renamed = new Map([...boardQueueNames(queues)].filter(([from, to]) => from !== to));
  return (req, res, next) => {
    const match = req.method === 'GET' ? /^\/queue\/([^/]+)(\/.*)?$/.exec(req.path) : null;
    const to = match?.[1] ? renamed.get(decodeURIComponent(match[1])) : undefined;
    if (!to) {
      next();
      return;
    }
    const search = req.originalUrl.includes('?') ? req.originalUrl.slice(req.originalUrl.indexOf('?')) : '';
    res.redirect(301, `${req.baseUrl}/queue/${encodeURIComponent(to)}${match?.[2] ?? ''}${search}`);
  };
}

export function createBoardRouter(
  queues: readonly Queue[],
  options: { readOnly: boolean; failedItems?: FailedItemsByType; registeredWorkers?: RegisteredWorkers },
): Router {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(BOARD_PATH);
  const failed = failedItemsCache(options.failedItems);
  const names = boardQueueNames(queues);
  const adapterOptions = { readOnlyMode: options.readOnly, allowRetries: !options.readOnly };
  createBullBoard({
    queues: queues.map((queue) => {
      const type = operationTypeOfQueue(queue.name);
      if (type === null) {
        return listRegisteredWorkers(new BullMQAdapter(queue, adapterOptions), options.registeredWorkers, null);
      }
      return listRegisteredWorkers(
        new BatchQueueAdapter(queue, type, names.get(queue.name) ?? queue.name, failed, adapterOptions),
        options.registeredWorkers,
        queue.name,
      );
    }),
    serverAdapter,
    options: {
      uiConfig: {
        boardTitle: 'opspad',
        miscLinks: [{ text: 'Operations (operator view)', url: OPERATIONS_PAGE_PATH }],
        hideDocsLink: true,
      },
    },
  });
  // The board is an express app of its own, with express's defaults: mounted in ours, it would
  // still announce itself.
  const board = serverAdapter.getRouter() as Express & { engines: Record<string, Render> };
  board.disable('x-powered-by');
  const render = board.engines['.ejs'];
  if (render) {
    board.engine('ejs', (path, values, callback) =>
      render(path, values, (error, html) => callback(error, html === undefined ? html : localOnly(html))),
    );
  }
  return board as unknown as Router;
}
