/**
 * Per-operation abort signals for the batches running in this process. A stop message (pause or
 * cancel) aborts every batch of that operation running here; later batches get a fresh signal.
 */

/** The abort reason of a stop signal: why the batch was told to stop (`paused`, `cancelled`, `shutdown`…). */
export class StopRequested extends Error {
  override readonly name = 'StopRequested';
  constructor(readonly reason: string) {
    super(`batch stopped: ${reason}`);
  }
}

export interface StopSignals {
  watch(operationId: string): { signal: AbortSignal; release(): void };
  stop(operationId: string, reason: string): void;
  /** Aborts everything (shutdown). */
  stopAll(reason: string): void;
}

export function createStopSignals(): StopSignals {
  const entries = new Map<string, { controller: AbortController; users: number }>();
  return {
    watch(operationId) {
      let entry = entries.get(operationId);
      if (!entry) {
        entry = { controller: new AbortController(), users: 0 };
        entries.set(operationId, entry);
      }
      entry.users++;
      const current = entry;
      return {
        signal: current.controller.signal,
        release() {
          current.users--;
          if (current.users === 0 && entries.get(operationId) === current) {
            entries.delete(operationId);
          }
        },
      };
    },
    stop(operationId, reason) {
      const entry = entries.get(operationId);
      if (entry) {
        entries.delete(operationId);
        entry.controller.abort(new StopRequested(reason));
      }
    },
    stopAll(reason) {
      for (const [operationId] of entries) {
        this.stop(operationId, reason);
      }
    },
  };
}
