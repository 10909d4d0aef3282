/**
 * The retention settings: periods are durations or off, every other period follows
 * OPSPAD_RETENTION unless set, and a bad value names its variable and what it accepts.
 */
import { describe, expect, it } from 'vitest';
import { type ConfigError, loadConfig } from './env.ts';
import { DEFAULT_PAD_VERSIONS_KEPT, retentionPolicy } from './retention.ts';

const DAY = 24 * 3600 * 1000;

describe('retentionPolicy', () => {
  it('keeps 30 days by default, every period following OPSPAD_RETENTION', () => {
    expect(retentionPolicy(loadConfig({}))).toEqual({
      itemsAfterMs: 30 * DAY,
      eventsAfterMs: 30 * DAY,
      tracesAfterMs: 30 * DAY,
      rendersAfterMs: 30 * DAY,
      padVersionsKept: DEFAULT_PAD_VERSIONS_KEPT,
      failuresKept: 1000,
      batchRows: 5000,
      budgetMs: 5000,
    });
    expect(retentionPolicy(loadConfig({ OPSPAD_RETENTION: '7d' }))).toMatchObject({
      itemsAfterMs: 7 * DAY,
      eventsAfterMs: 7 * DAY,
      tracesAfterMs: 7 * DAY,
      rendersAfterMs: 7 * DAY,
    });
  });

  it('turns everything off with OPSPAD_RETENTION=off (or 0), unless a setting of its own says otherwise', () => {
    for (const off of ['off', '0', 'never', 'OFF']) {
      expect(retentionPolicy(loadConfig({ OPSPAD_RETENTION: off }))).toMatchObject({
        itemsAfterMs: null,
        eventsAfterMs: null,
        tracesAfterMs: null,
        rendersAfterMs: null,
        padVersionsKept: null,
      });
    }
    expect(
      retentionPolicy(
        loadConfig({ OPSPAD_RETENTION: 'off', OPSPAD_RETENTION_RENDERS: '12h', OPSPAD_RETENTION_PAD_VERSIONS: '20' }),
      ),
    ).toMatchObject({ itemsAfterMs: null, rendersAfterMs: 12 * 3600 * 1000, padVersionsKept: 20 });
    expect(
      retentionPolicy(loadConfig({ OPSPAD_RETENTION_EVENTS: 'off', OPSPAD_RETENTION_PAD_VERSIONS: '0' })),
    ).toMatchObject({ itemsAfterMs: 30 * DAY, eventsAfterMs: null, padVersionsKept: null });
  });

  it('refuses what is not a duration, a count or a bounded batch, naming the variable', () => {
    const problems = (env: NodeJS.ProcessEnv) => {
      try {
        loadConfig(env);
      } catch (error) {
        return (error as ConfigError).problems.join('\n');
      }
      throw new Error('expected a ConfigError');
    };
    expect(problems({ OPSPAD_RETENTION: 'a month' })).toContain(
      'OPSPAD_RETENTION: must be a duration such as 30d, 12h or 90s, or 0/off to keep for good',
    );
    expect(problems({ OPSPAD_RETENTION_PAD_VERSIONS: '-3' })).toContain(
      'OPSPAD_RETENTION_PAD_VERSIONS: must be a whole number, or 0/off to keep every one',
    );
    expect(problems({ OPSPAD_RETENTION_BATCH: '100000' })).toContain('OPSPAD_RETENTION_BATCH: must be at most 50000');
    expect(problems({ OPSPAD_RETENTION_FAILURES: '-1' })).toContain('OPSPAD_RETENTION_FAILURES: must be 0 or more');
  });
});
