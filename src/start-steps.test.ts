/**
 * Start-up steps: what the steps before a failure opened is closed in reverse order, the rest
 * never runs, and the rejection names the step, with the cause on one line.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.ts';
import { describeFailure, StartFailedError, startSequence } from './start-steps.ts';

const logger = createLogger('silent');

async function rejection(promise: Promise<unknown>): Promise<StartFailedError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(StartFailedError);
  return error as StartFailedError;
}

describe('startSequence', () => {
  it('closes what the earlier steps opened, in reverse order, and names the step that threw', async () => {
    const events: string[] = [];
    const start = startSequence({ logger, timeoutMs: 10_000 });
    const opens = (name: string) =>
      start.step(
        name,
        () => {
          events.push(`open ${name}`);
          return name;
        },
        {
          close: (opened) => async () => {
            events.push(`close ${opened}`);
          },
        },
      );
    await opens('database');
    await start.step('migrations', () => events.push('migrate')); // opens nothing to close
    await opens('queue backend');
    await opens('HTTP server');
    const cause = new Error('listen EADDRINUSE');
    const error = await rejection(
      start.step('workers', () => {
        throw cause;
      }),
    );
    expect(error.message).toBe('opspad start failed at workers: listen EADDRINUSE');
    expect(error).toMatchObject({ step: 'workers', code: 'start_failed', reason: 'listen EADDRINUSE', cause });
    expect(events).toEqual([
      'open database',
      'migrate',
      'open queue backend',
      'open HTTP server',
      'close HTTP server',
      'close queue backend',
      'close database',
    ]);
  });

  it('keeps going when a close fails, and still rejects with the failed step', async () => {
    const closed: string[] = [];
    const start = startSequence({ logger, timeoutMs: 10_000 });
    await start.step('database', () => 'db', { close: () => async () => void closed.push('database') });
    await start.step('queue backend', () => 'redis', {
      close: () => async () => {
        throw new Error('already gone');
      },
    });
    const error = await rejection(start.step('queues', () => Promise.reject(new Error('no queue'))));
    expect(error.step).toBe('queues');
    expect(closed).toEqual(['database']);
  });

  it('rejects at the shutdown bound when a close never ends', async () => {
    const start = startSequence({ logger, timeoutMs: 50 });
    await start.step('queue backend', () => 'redis', { close: () => () => new Promise<void>(() => {}) });
    const error = await rejection(start.step('HTTP server', () => Promise.reject(new Error('EADDRINUSE'))));
    expect(error.step).toBe('HTTP server');
  });

  it('lets a nested start keep its own step, after closing the outer steps too', async () => {
    const closed: string[] = [];
    const outer = startSequence({ logger, timeoutMs: 10_000 });
    await outer.step('control socket', () => 'socket', { close: () => async () => void closed.push('control socket') });
    const error = await rejection(
      outer.step('service', async () => {
        const inner = startSequence({ logger, timeoutMs: 10_000 });
        await inner.step('queue backend', () => 'redis', {
          close: () => async () => void closed.push('queue backend'),
        });
        await inner.step('HTTP server', () => Promise.reject(new Error('EADDRINUSE')));
      }),
    );
    expect(error.message).toBe('opspad start failed at HTTP server: EADDRINUSE');
    expect(closed).toEqual(['queue backend', 'control socket']);
  });

  it('fails the step a hook throws for, before the step runs', async () => {
    let ran = false;
    const start = startSequence({
      logger,
      timeoutMs: 10_000,
      beforeStep: (step) => {
        if (step === 'workers') {
          throw new Error('injected');
        }
      },
    });
    const error = await rejection(
      start.step('workers', () => {
        ran = true;
      }),
    );
    expect(error.message).toBe('opspad start failed at workers: injected');
    expect(ran).toBe(false);
  });
});

describe('a step’s shutdown', () => {
  it('is declared with the step, runs in the declared order, and closes the step if a later one fails', async () => {
    const order = { database: 3, 'HTTP server': 1, workers: 2 } as const;
    const events: string[] = [];
    const stops = (name: string) => ({ shutdown: () => ({ run: async () => void events.push(`stop ${name}`) }) });
    const start = startSequence<keyof typeof order | 'migrations'>({ logger, timeoutMs: 10_000, stopOrder: order });
    await start.step('database', () => 'db', stops('database'));
    await start.step('migrations', () => undefined);
    await start.step('HTTP server', () => 'server', stops('HTTP server'));
    await start.step('workers', () => 'pool', {
      close: () => async () => void events.push('close workers at once'),
      shutdown: () => ({ run: async () => void events.push('stop workers') }),
    });
    expect(start.shutdownSteps().map((step) => step.name)).toEqual(['HTTP server', 'workers', 'database']);
    await Promise.all(start.shutdownSteps().map((step) => step.run()));
    expect(events).toEqual(['stop HTTP server', 'stop workers', 'stop database']);

    events.length = 0;
    const failing = startSequence<keyof typeof order>({ logger, timeoutMs: 10_000, stopOrder: order });
    await failing.step('database', () => 'db', stops('database'));
    await failing.step('workers', () => 'pool', {
      close: () => async () => void events.push('close workers at once'),
      shutdown: () => ({ run: async () => void events.push('stop workers') }),
    });
    await rejection(failing.step('HTTP server', () => Promise.reject(new Error('EADDRINUSE'))));
    expect(events).toEqual(['close workers at once', 'stop database']);
  });

  it('needs a place in the stop order', async () => {
    const start = startSequence({ logger, timeoutMs: 10_000 });
    const error = await rejection(start.step('tracing', () => 't', { shutdown: () => ({ run: async () => {} }) }));
    expect(error.reason).toBe('start step tracing declares a shutdown but has no place in stopOrder');
  });
});

describe('describeFailure', () => {
  it("puts a wrapped cause on the line, each message's first line only, once", () => {
    const driver = new Error('Failed query: CREATE SCHEMA IF NOT EXISTS "drizzle"\nparams: ', {
      cause: new Error('permission denied for database app'),
    });
    expect(describeFailure(driver)).toBe(
      'Failed query: CREATE SCHEMA IF NOT EXISTS "drizzle": permission denied for database app',
    );
    const repeated = new Error('OPSPAD_HANDLERS: loading x.mjs failed: boom', { cause: new Error('boom') });
    expect(describeFailure(repeated)).toBe('OPSPAD_HANDLERS: loading x.mjs failed: boom');
    expect(describeFailure('a string')).toBe('a string');
    expect(describeFailure(new Error(''))).toBe('unknown error');
  });
});
