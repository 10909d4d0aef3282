/**
 * How long finished work is kept: part `retention` of src/config/settings-parts.ts (the periods
 * are parsed by src/config/retention.ts).
 */
import { z } from 'zod';
import { duration, keepCount, positiveInt, retention } from './parsers.ts';

/** How long finished work is kept (src/config/retention.ts); the reconciler of any process prunes. */
export const RETENTION_SETTINGS = {
  OPSPAD_RETENTION: retention.default(30 * 24 * 3600 * 1000).meta({
    description:
      'Finished operations lose their item rows this long after they finished (row, counts, first failures stay); the other periods default to it; `off` keeps everything.',
    bound: "time a finished operation's items are kept",
  }),
  OPSPAD_RETENTION_EVENTS: retention.optional().meta({
    description: 'How long batch events of finished operations and pad events are kept; unset: OPSPAD_RETENTION.',
    bound: 'time audit and pad events are kept',
  }),
  OPSPAD_RETENTION_TRACES: retention.optional().meta({
    description: "How long notes traces are kept (an ended execution's after its end); unset: OPSPAD_RETENTION.",
    bound: 'time notes traces are kept',
  }),
  OPSPAD_RETENTION_RENDERS: retention.optional().meta({
    description: 'How long context renders (what the assistant was told each turn) are kept; unset: OPSPAD_RETENTION.',
    bound: 'time context renders are kept',
  }),
  OPSPAD_RETENTION_PAD_VERSIONS: keepCount.optional().meta({
    description: 'Versions kept per structured scratchpad, the newest; unset: 100 (every one with retention off).',
    bound: 'versions kept per structured scratchpad',
  }),
  OPSPAD_RETENTION_FAILURES: z.coerce
    .number({ error: 'must be a whole number' })
    .int('must be a whole number')
    .min(0, 'must be 0 or more')
    .max(100_000, 'must be at most 100000')
    .default(1000)
    .meta({
      description:
        'Failure rows a pruned operation keeps, the first ones (at most 100000); the rest are counted by reason.',
      bound: 'failures kept per pruned operation',
    }),
  OPSPAD_RETENTION_BATCH: positiveInt
    .pipe(z.number().max(50_000, 'must be at most 50000'))
    .default(5000)
    .meta({ description: 'Rows one retention statement deletes at most (at most 50000), each a short transaction.' }),
  OPSPAD_RETENTION_BUDGET: duration
    .default(5000)
    .meta({ description: 'Time one retention run may take; what is left waits for the next reconciler pass.' }),
};
