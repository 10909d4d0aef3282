/**
 * Long pure computations on the event loop, in slices: a generator does the work and yields
 * often; {@link runInSlices} runs it and lets other callbacks (requests, health checks, timers)
 * run whenever a slice has taken `sliceMs`. One reorganization of the largest pad the limits
 * allow then holds the loop for a few milliseconds at a time instead of all at once
 * (`event_loop_max_block_ms` in the benchmark).
 */

/** Lets every callback already queued run (I/O included) before continuing. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Runs `steps` to its end, yielding to the event loop whenever `sliceMs` have passed. */
export async function runInSlices<T>(steps: Generator<void, T>, sliceMs = 10): Promise<T> {
  let sliceStart = performance.now();
  for (;;) {
    const step = steps.next();
    if (step.done) {
      return step.value;
    }
    if (performance.now() - sliceStart >= sliceMs) {
      await yieldToEventLoop();
      sliceStart = performance.now();
    }
  }
}
