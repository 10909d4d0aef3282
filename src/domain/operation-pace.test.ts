import { describe, expect, it } from 'vitest';
import { formatDuration, formatRate, paceOf } from './operation-pace.ts';

describe('the pace of an operation', () => {
  it('is the recent rate, and the time the rest takes at it', () => {
    expect(paceOf(600, 60, 1200)).toEqual({ perSecond: 10, etaSeconds: 120 });
    expect(paceOf(600, 60, 0)).toEqual({ perSecond: 10, etaSeconds: 0 });
  });

  it('has no rate nor ETA when nothing was recorded lately', () => {
    expect(paceOf(0, 60, 100)).toEqual({ perSecond: null, etaSeconds: null });
  });

  it('does not take one batch recorded a moment ago for a rate of thousands a second', () => {
    expect(paceOf(50, 0.01, 100).perSecond).toBe(50);
  });

  it('reads as a rate and a duration', () => {
    expect(formatRate(1234.4)).toBe('1,234/s');
    expect(formatRate(12.54)).toBe('12.5/s');
    expect(formatRate(0.05)).toBe('3/min');
    expect(formatRate(0.001)).toBe('0.001/s');
    expect(formatDuration(0.4)).toBe('0s');
    expect(formatDuration(45)).toBe('45s');
    expect(formatDuration(185)).toBe('3m 05s');
    expect(formatDuration(7800)).toBe('2h 10m');
    expect(formatDuration(3 * 86_400 + 4 * 3600 + 59)).toBe('3d 4h');
  });
});
