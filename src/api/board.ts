/**
 * Bull Board at /admin/queues: every opspad queue, each job's progress and log lines (which
 * operation, how far), behind basic auth. Read-only mode hides its buttons (Bull Board's
 * `readOnlyMode`); the server refuses the changes themselves (operator-guard.ts).
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import type { Express, Router } from 'express';

export const BOARD_PATH = '/admin/queues';

export function createBoardRouter(queues: readonly Queue[], options: { readOnly: boolean }): Router {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(BOARD_PATH);
  createBullBoard({
    queues: queues.map(
      (queue) => new BullMQAdapter(queue, { readOnlyMode: options.readOnly, allowRetries: !options.readOnly }),
    ),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'opspad', miscLinks: [{ text: 'Operations', url: '/admin/operations' }] } },
  });
  // The board is an express app of its own, with express's defaults: mounted in ours, it would
  // still announce itself.
  const board = serverAdapter.getRouter() as Express;
  board.disable('x-powered-by');
  return board as unknown as Router;
}
