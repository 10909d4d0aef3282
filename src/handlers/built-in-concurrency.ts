/**
 * How much the built-in handlers run at once in one worker process, unless the settings say
 * otherwise (OPSPAD_WEBHOOK_CONCURRENCY and the rest). Both wait on something slow per item,
 * so what bounds their throughput is items in flight: `concurrency` batches × items at once.
 */
export const BUILT_IN_CONCURRENCY = {
  /** 16 batches × 32 requests: about 500 requests in flight. */
  webhook: { concurrency: 16, itemConcurrency: 32 },
  /** Every item of a demo batch is in flight together: 16 batches of 125 are 2,000 items. */
  demo: { concurrency: 16 },
} as const;

/** The most either setting takes: the ceiling a handler of one's own has too. */
export const MAX_HANDLER_CONCURRENCY = 1000;
