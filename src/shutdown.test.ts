/**
 * The shutdown runner: steps in order, a failing step does not stop the rest, and a step that
 * never ends is given up on at the bound, named, and forced along with every step after it.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.ts';
import { runShutdown, type ShutdownStep } from './shutdown.ts';

const logger = createLogger('silent');

describe('runShutdown', () => {
  it('runs every step in order and reports the ones that threw', async () => {
    const ran: string[] = [];
    const step = (name: string, fail = false): ShutdownStep => ({
      name,
      async run() {
        ran.push(name);
        if (fail) {
          throw new Error(`${name} broke`);
        }
      },
    });
    const report = await runShutdown([step('HTTP server'), step('workers', true), step('database')], {
      timeoutMs: 10_000,
      logger,
    });
    expect(ran).toEqual(['HTTP server', 'workers', 'database']);
    expect(report).toMatchObject({ failed: ['workers'] });
    expect(report.stuck).toBeUndefined();
  });

  it('gives up on a step that never ends at the bound, naming it and forcing what is left', async () => {
    const ran: string[] = [];
    const forced: string[] = [];
    const started: string[] = [];
    const steps: ShutdownStep[] = [
      { name: 'HTTP server', run: async () => void ran.push('HTTP server'), force: () => forced.push('HTTP server') },
      { name: 'workers', run: () => new Promise(() => {}), force: () => forced.push('workers') },
      { name: 'Redis', run: async () => void ran.push('Redis'), force: () => forced.push('Redis') },
    ];
    const report = await runShutdown(steps, { timeoutMs: 200, logger, onStep: (name) => started.push(name) });
    expect(report.stuck).toBe('workers');
    expect(report.elapsedMs).toBeGreaterThanOrEqual(150);
    expect(started).toEqual(['HTTP server', 'workers']);
    expect(ran).toEqual(['HTTP server']);
    // The stuck step and those after it are forced; the one that finished is left alone.
    expect(forced).toEqual(['workers', 'Redis']);
  });
});
