/**
 * Tells every worker process, through Redis pub/sub, that an operation was paused or cancelled,
 * so handlers in flight see their AbortSignal fire within moments instead of at the end of the
 * batch. Pub/sub can drop a message (a worker reconnecting); nothing depends on it for
 * correctness: each lane also checks the operation's status in Postgres before every batch.
 */
import type { Redis } from 'ioredis';
import { z } from 'zod';

export function controlChannelName(prefix: string): string {
  return `${prefix}:control`;
}

const StopMessage = z.object({ operation_id: z.uuid(), reason: z.string() });
export type StopMessage = z.infer<typeof StopMessage>;

export async function publishStop(redis: Redis, prefix: string, message: StopMessage): Promise<void> {
  await redis.publish(controlChannelName(prefix), JSON.stringify(message));
}

/** Subscribes `subscriber` (a connection of its own) and calls `onStop` for each message. */
export async function subscribeStops(
  subscriber: Redis,
  prefix: string,
  onStop: (message: StopMessage) => void,
): Promise<void> {
  const channel = controlChannelName(prefix);
  subscriber.on('message', (from, text) => {
    if (from !== channel) {
      return;
    }
    try {
      onStop(StopMessage.parse(JSON.parse(text)));
    } catch {
      // Not ours, or from a newer version: ignore.
    }
  });
  await subscriber.subscribe(channel);
}
