/**
 * Tells every worker process that an operation was paused or cancelled, so handlers in flight
 * see their AbortSignal fire within moments instead of at the end of the batch: Redis pub/sub on
 * the Redis backend, LISTEN/NOTIFY on the Postgres one. Either can drop a message (a worker
 * reconnecting); nothing depends on it for correctness: each lane also checks the operation's
 * status in Postgres before every batch.
 */
import { z } from 'zod';
import type { RedisClient } from './connection.ts';

export const StopMessage = z.object({ operation_id: z.uuid(), reason: z.string() });
export type StopMessage = z.infer<typeof StopMessage>;

export interface ControlChannel {
  publish(message: StopMessage): Promise<void>;
  /** Calls `onStop` for every message until the returned subscription is closed. */
  subscribe(onStop: (message: StopMessage) => void): Promise<{ close(): Promise<void> }>;
}

function parseStop(text: string | undefined): StopMessage | undefined {
  try {
    return StopMessage.parse(JSON.parse(text ?? ''));
  } catch {
    return undefined; // not ours, or from a newer version: ignore
  }
}

export function controlChannelName(prefix: string): string {
  return `${prefix}:control`;
}

/**
 * Redis pub/sub under the deployment's prefix; each subscription has a connection of its own.
 * On a Redis Cluster a PUBLISH reaches the subscribers of every node (the cluster bus carries it).
 */
export function redisControlChannel(options: {
  publisher: RedisClient;
  prefix: string;
  newSubscriber: () => RedisClient;
}): ControlChannel {
  const channel = controlChannelName(options.prefix);
  return {
    async publish(message) {
      await options.publisher.publish(channel, JSON.stringify(message));
    },
    async subscribe(onStop) {
      const subscriber = options.newSubscriber();
      subscriber.on('message', (from: string, text: string) => {
        const message = from === channel ? parseStop(text) : undefined;
        if (message) {
          onStop(message);
        }
      });
      await subscriber.subscribe(channel);
      return {
        async close() {
          subscriber.disconnect();
        },
      };
    },
  };
}

/** The part of a `pg` LISTEN connection the channel uses. */
export interface NotificationClient {
  query(text: string): Promise<unknown>;
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown;
  removeListener(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown;
}

/** Where the Postgres channel sends and listens: BullMQ's connection, shared with the workers. */
export interface NotificationSource {
  notify(channel: string, payload: string): Promise<void>;
  /** The process's one LISTEN connection (BullMQ's workers wait for jobs on it too). */
  listenClient(): Promise<NotificationClient>;
  /** Calls `listener` whenever the LISTEN connection was lost and a new one must be asked for. */
  onListenerLost(listener: () => void): () => void;
}

/** One channel for every deployment on the database; `ns` (the queue schema) keeps them apart. */
export const POSTGRES_CONTROL_CHANNEL = 'opspad_control';
const RESUBSCRIBE_DELAY_MS = 1000;

/**
 * LISTEN/NOTIFY on the connection BullMQ's workers already hold, so stopping work costs no
 * connection of its own. A lost connection is listened on again once BullMQ has a new one.
 */
export function postgresControlChannel(source: NotificationSource, namespace: string): ControlChannel {
  return {
    async publish(message) {
      await source.notify(POSTGRES_CONTROL_CHANNEL, JSON.stringify({ ns: namespace, ...message }));
    },
    async subscribe(onStop) {
      let closed = false;
      let current: NotificationClient | undefined;
      let retry: NodeJS.Timeout | undefined;
      const listener = (notification: { channel: string; payload?: string }) => {
        if (notification.channel !== POSTGRES_CONTROL_CHANNEL) {
          return;
        }
        const payload = parseNamespaced(notification.payload);
        if (payload?.ns === namespace) {
          const message = parseStop(JSON.stringify(payload.message));
          if (message) {
            onStop(message);
          }
        }
      };
      const listen = async () => {
        const client = await source.listenClient();
        client.on('notification', listener);
        current = client;
        await client.query(`LISTEN ${POSTGRES_CONTROL_CHANNEL}`);
      };
      const relisten = () => {
        current = undefined;
        if (closed) {
          return;
        }
        listen().catch(() => {
          // Postgres is away: try again until it answers or the subscription closes.
          retry = setTimeout(relisten, RESUBSCRIBE_DELAY_MS);
        });
      };
      const stopWatching = source.onListenerLost(relisten);
      await listen();
      return {
        async close() {
          closed = true;
          clearTimeout(retry);
          stopWatching();
          current?.removeListener('notification', listener);
        },
      };
    },
  };
}

function parseNamespaced(text: string | undefined): { ns: unknown; message: unknown } | undefined {
  try {
    const { ns, ...message } = JSON.parse(text ?? '') as Record<string, unknown>;
    return { ns, message };
  } catch {
    return undefined;
  }
}
