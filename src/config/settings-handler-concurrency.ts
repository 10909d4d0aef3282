/**
 * How many batches, and items of a batch, the built-in handlers run at once in one worker
 * process. A tenant's operation drives them (a webhook operation's items are requests to the
 * tenant's URL), so each is bounded. Part of the `handlers` settings (src/config/settings-parts.ts).
 */
import { z } from 'zod';
import { BUILT_IN_CONCURRENCY, MAX_HANDLER_CONCURRENCY } from '../handlers/built-in-concurrency.ts';
import { positiveInt } from './parsers.ts';

const atMost = positiveInt.pipe(z.number().max(MAX_HANDLER_CONCURRENCY, `must be at most ${MAX_HANDLER_CONCURRENCY}`));

export const HANDLER_CONCURRENCY_SETTINGS = {
  OPSPAD_WEBHOOK_CONCURRENCY: atMost.default(BUILT_IN_CONCURRENCY.webhook.concurrency).meta({
    description: `Batches of webhook operations one worker process runs at once (1 to ${MAX_HANDLER_CONCURRENCY}).`,
    bound: 'webhook batches in flight per worker process',
  }),
  OPSPAD_WEBHOOK_ITEM_CONCURRENCY: atMost.default(BUILT_IN_CONCURRENCY.webhook.itemConcurrency).meta({
    description: `Requests one webhook batch has in flight (1 to ${MAX_HANDLER_CONCURRENCY}); a worker process sends at most OPSPAD_WEBHOOK_CONCURRENCY times this many at once.`,
    bound: 'webhook requests in flight per batch',
  }),
  OPSPAD_DEMO_CONCURRENCY: atMost.default(BUILT_IN_CONCURRENCY.demo.concurrency).meta({
    description: `Batches of demo operations one worker process runs at once (1 to ${MAX_HANDLER_CONCURRENCY}); every item of a demo batch is in flight together.`,
    bound: 'demo batches in flight per worker process',
  }),
};
