/**
 * Bull Board at /admin/queues: every opspad queue, each job's progress and log lines (which
 * operation, how far), behind basic auth.
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import type { Router } from 'express';

export const BOARD_PATH = '/admin/queues';

export function createBoardRouter(queues: readonly Queue[], options: { readOnly: boolean }): Router {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(BOARD_PATH);
  createBullBoard({
    queues: queues.map((queue) => new BullMQAdapter(queue, { readOnlyMode: options.readOnly })),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'opspad', miscLinks: [{ text: 'Operations', url: '/admin/operations' }] } },
  });
  return serverAdapter.getRouter() as Router;
}
