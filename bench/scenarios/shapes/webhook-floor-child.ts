/**
 * The floor of the webhook scenario (webhook.ts), in a process of its own as a worker is: the
 * built-in `webhook` handler alone, its `handle` called for each item with `inFlight` calls at
 * once. Each call signs its body and sends it through the egress guard, as in a worker; there is
 * no queue, no lease, no record and no batch around it. One handler and one guard serve every
 * call of the process, so runs after the first reuse its connections, as a worker's do.
 */
import { cpuUsage } from 'node:process';
import { createEgressGuard, type EgressGuard } from '../../../src/egress/index.ts';
import type { ItemContext, ItemHandler } from '../../../src/handlers/types.ts';
import { createWebhookHandler } from '../../../src/handlers/webhook.ts';
import { createLogger } from '../../../src/logger.ts';
import { serve } from '../../lib/forked-child.ts';

interface DeliverArgs {
  url: string;
  /** The receiver's host:port, allowed as OPSPAD_WEBHOOK_ALLOW allows it for the worker. */
  host: string;
  secrets: string[];
  items: number;
  inFlight: number;
  operationId: string;
  organizationId: string;
}

let sender: { guard: EgressGuard; handler: ItemHandler } | undefined;

function senderFor(args: DeliverArgs): { guard: EgressGuard; handler: ItemHandler } {
  if (!sender) {
    const guard = createEgressGuard({ allow: [args.host] });
    const handler = createWebhookHandler({ signingSecrets: async () => args.secrets, guard });
    sender = { guard, handler };
  }
  return sender;
}

async function deliver(raw: Record<string, unknown>): Promise<{ seconds: number; cpuSeconds: number }> {
  const args = raw as unknown as DeliverArgs;
  const { handler } = senderFor(args);
  const queryParams = { url: args.url, payload: { template: 'bench' } };
  const signal = new AbortController().signal;
  const logger = createLogger('silent');
  let next = 0;
  const lane = async () => {
    while (next < args.items) {
      const itemId = `contact-${next++}`;
      const ctx: ItemContext = {
        operationId: args.operationId,
        organizationId: args.organizationId,
        operationType: 'webhook',
        queryParams,
        signal,
        logger,
        idempotencyKey: `${args.operationId}:${itemId}`,
        attempt: 1,
      };
      await handler.handle(itemId, ctx);
    }
  };
  const cpuBefore = cpuUsage();
  const start = performance.now();
  await Promise.all(Array.from({ length: args.inFlight }, lane));
  const seconds = (performance.now() - start) / 1000;
  const cpu = cpuUsage(cpuBefore);
  return { seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}

serve({ deliver }, async () => sender?.guard.close());
