/**
 * The retention settings as one policy. Every period but OPSPAD_RETENTION is optional and
 * follows it when unset, so `OPSPAD_RETENTION=off` alone keeps everything for good, and
 * `OPSPAD_RETENTION=7d` shortens every period at once; each can still be set on its own.
 */
import type { RetentionPolicy } from '../domain/retention.ts';
import type { Config } from './env.ts';

/** Versions kept per pad when OPSPAD_RETENTION_PAD_VERSIONS is unset and retention is on. */
export const DEFAULT_PAD_VERSIONS_KEPT = 100;

type RetentionSettings = Pick<
  Config,
  | 'OPSPAD_RETENTION'
  | 'OPSPAD_RETENTION_EVENTS'
  | 'OPSPAD_RETENTION_TRACES'
  | 'OPSPAD_RETENTION_RENDERS'
  | 'OPSPAD_RETENTION_PAD_VERSIONS'
  | 'OPSPAD_RETENTION_FAILURES'
  | 'OPSPAD_RETENTION_BATCH'
  | 'OPSPAD_RETENTION_BUDGET'
>;

export function retentionPolicy(config: RetentionSettings): RetentionPolicy {
  const base = config.OPSPAD_RETENTION;
  const follow = (value: number | null | undefined) => (value === undefined ? base : value);
  return {
    itemsAfterMs: base,
    eventsAfterMs: follow(config.OPSPAD_RETENTION_EVENTS),
    tracesAfterMs: follow(config.OPSPAD_RETENTION_TRACES),
    rendersAfterMs: follow(config.OPSPAD_RETENTION_RENDERS),
    padVersionsKept:
      config.OPSPAD_RETENTION_PAD_VERSIONS === undefined
        ? base === null
          ? null
          : DEFAULT_PAD_VERSIONS_KEPT
        : config.OPSPAD_RETENTION_PAD_VERSIONS,
    failuresKept: config.OPSPAD_RETENTION_FAILURES,
    batchRows: config.OPSPAD_RETENTION_BATCH,
    budgetMs: config.OPSPAD_RETENTION_BUDGET,
  };
}
