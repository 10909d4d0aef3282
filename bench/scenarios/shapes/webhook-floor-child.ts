/**
 * The floor of the webhook scenario (webhook.ts), in a process of its own as a worker is: the
 * built-in `webhook` handler alone, its `handle` called for each item with `inFlight` calls at
 * once. Each call signs its body and sends it through the egress guard, as in a worker; there is
 * no queue, no lease, no record and no batch around it. What this process reaches against the
 * scenario's receiver is the most any worker could deliver on the machine with that handler.
 */
import { cpuUsage } from 'node:process';
import { createEgressGuard } from '../../../src/egress/index.ts';
import type { ItemContext } from '../../../src/handlers/types.ts';
import { createWebhookHandler } from '../../../src/handlers/webhook.ts';
import { createLogger } from '../../../src/logger.ts';
import { serve } from '../../lib/forked-child.ts';

interface DeliverArgs {
  url: string;
  host: string;
  secret: string;
  items: number;
  inFlight: number;
  operationId: string;
  organizationId: string;
}

async function deliver(args: Record<string, unknown>): Promise<{ seconds: number; cpuSeconds: number }> {
  const { url, host, secret, items, inFlight, operationId, organizationId } = args as unknown as DeliverArgs;
  const handler = createWebhookHandler({
    signingSecrets: async () => [secret],
    guard: createEgressGuard({ allow: [host] }),
  });
  const queryParams = { url, payload: { template: 'bench' } };
  const signal = new AbortController().signal;
  const logger = createLogger('silent');
  let next = 0;
  const lane = async () => {
    while (next < items) {
      const itemId = `contact-${next++}`;
      const ctx: ItemContext = {
        operationId,
        organizationId,
        operationType: 'webhook',
        queryParams,
        signal,
        logger,
        idempotencyKey: `${operationId}:${itemId}`,
        attempt: 1,
      };
      await handler.handle(itemId, ctx);
    }
  };
  const cpuBefore = cpuUsage();
  const start = performance.now();
  await Promise.all(Array.from({ length: inFlight }, lane));
  const seconds = (performance.now() - start) / 1000;
  const cpu = cpuUsage(cpuBefore);
  return { seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}

serve({ deliver });
