/**
 * The failure summary that replaces deleted failure rows: exact counts for every reason it
 * lists, bounded whatever the reasons are, and what `get` shows of it.
 */
import { describe, expect, it } from 'vitest';
import {
  itemsPrunedOutput,
  MAX_SUMMARY_REASONS,
  mergePrunedFailures,
  NO_REASON,
  reasonsByCount,
  SUMMARY_REASON_CHARS,
} from './retention.ts';

describe('mergePrunedFailures', () => {
  it('adds up the failures of each statement by reason, exactly', () => {
    let summary = mergePrunedFailures(undefined, [
      { reason: 'no phone', count: 3 },
      { reason: null, count: 1 },
    ]);
    summary = mergePrunedFailures(summary, [
      { reason: 'opted out', count: 2 },
      { reason: 'no phone', count: 4 },
    ]);
    expect(summary).toEqual({
      count: 10,
      reasons: [
        { reason: 'no phone', count: 7 },
        { reason: NO_REASON, count: 1 },
        { reason: 'opted out', count: 2 },
      ],
      other: 0,
    });
    expect(reasonsByCount(summary).map((r) => r.reason)).toEqual(['no phone', 'opted out', NO_REASON]);
  });

  it('stays bounded: at most 20 reasons of at most 160 characters, the rest counted as other', () => {
    const many = Array.from({ length: 120 }, (_, i) => ({ reason: `reason ${i} ${'x'.repeat(500)}`, count: 1 }));
    const summary = mergePrunedFailures(mergePrunedFailures(undefined, many.slice(0, 60)), many);
    expect(summary.count).toBe(180);
    expect(summary.reasons).toHaveLength(MAX_SUMMARY_REASONS);
    expect(Math.max(...summary.reasons.map((r) => r.reason.length))).toBe(SUMMARY_REASON_CHARS);
    // A listed reason is counted from its first failure on: exact, never an estimate.
    expect(summary.reasons[0]).toMatchObject({ count: 2 });
    expect(summary.other).toBe(180 - 2 * MAX_SUMMARY_REASONS);
  });
});

describe('itemsPrunedOutput', () => {
  it('says nothing of an operation retention has not touched, and what is kept of one it has', () => {
    expect(itemsPrunedOutput({}, 4)).toBeUndefined();
    expect(itemsPrunedOutput({ items_pruned_through: 5000 }, 4)).toEqual({
      at: null,
      failures_kept: 4,
      failures_pruned: 0,
      pruned_failure_reasons: [],
      other_pruned_failures: 0,
    });
    const at = '2026-11-22T10:00:00.123456+00:00';
    expect(
      itemsPrunedOutput(
        { items_pruned_at: at, pruned_failures: { count: 7, reasons: [{ reason: 'no phone', count: 7 }], other: 0 } },
        10,
      ),
    ).toEqual({
      at: '2026-11-22T10:00:00.123Z',
      failures_kept: 3,
      failures_pruned: 7,
      pruned_failure_reasons: [{ reason: 'no phone', count: 7 }],
      other_pruned_failures: 0,
    });
  });
});
