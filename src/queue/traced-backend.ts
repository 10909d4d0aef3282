/**
 * The queue backend with BullMQ's telemetry option on every queue and worker it creates, so job
 * adds and job processing join the trace of whatever added them (src/telemetry/bullmq-telemetry.ts).
 * Without an option (traces off) the backend is returned as it is: BullMQ then skips all of it.
 */
import type { Telemetry } from 'bullmq';
import type { QueueBackend } from './backend.ts';

export function withTelemetry(backend: QueueBackend, telemetry: Telemetry | undefined): QueueBackend {
  if (!telemetry) {
    return backend;
  }
  // The backends are plain objects of closures: a copy with two functions replaced behaves the same.
  return {
    ...backend,
    createQueue: (name, settings) => backend.createQueue(name, { ...settings, telemetry }),
    createWorker: (name, processor, settings) => backend.createWorker(name, processor, { ...settings, telemetry }),
  };
}
