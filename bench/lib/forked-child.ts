/**
 * The child side of forked.ts: answers the parent's calls with `handlers` and reports events.
 * A handler's error goes back to the caller; SIGTERM runs `onExit` and ends the process.
 */

type Handler = (args: Record<string, unknown>) => Promise<unknown> | unknown;

export function serve(handlers: Record<string, Handler>, onExit: () => Promise<void> = async () => {}): void {
  process.on('message', (message: { id: number; op: string; args: Record<string, unknown> }) => {
    const handler = handlers[message.op];
    Promise.resolve()
      .then(() => {
        if (!handler) {
          throw new Error(`unknown op "${message.op}"`);
        }
        return handler(message.args);
      })
      .then(
        (result) => process.send?.({ id: message.id, result: result ?? null }),
        (error: unknown) =>
          process.send?.({
            id: message.id,
            error: error instanceof Error ? (error.stack ?? error.message) : String(error),
          }),
      );
  });
  let exiting = false;
  process.on('SIGTERM', () => {
    if (exiting) {
      return;
    }
    exiting = true;
    void onExit()
      .catch((error: unknown) => process.stderr.write(`${process.argv[1]}: ${String(error)}\n`))
      .finally(() => process.exit(0));
  });
  process.send?.('ready');
}

/** Reports something to the parent unasked. */
export function emit(event: Record<string, unknown>): void {
  process.send?.({ event });
}

/**
 * Reports a job that failed to the parent, which ends the run with it: a peer would retry the job
 * after a backoff of seconds to hours, and the run would wait for an item that never comes.
 */
export function reportFailure(error: unknown): void {
  emit({ failed: error instanceof Error ? error.message : String(error) });
}

/**
 * Counts items a worker recorded and reports the new ones every few milliseconds (one message per
 * tick, not one per job).
 */
export function recordedCounter(everyMs = 5) {
  let unreported = 0;
  const timer = setInterval(() => {
    if (unreported > 0) {
      emit({ recorded: unreported });
      unreported = 0;
    }
  }, everyMs);
  timer.unref();
  return {
    add(n: number) {
      unreported += n;
    },
  };
}
