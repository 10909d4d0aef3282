/**
 * The handler contract as users write it: `defineHandler` types `handle`'s arguments and refuses
 * misspelt settings, and the errors keep their meaning across two copies of opspad (the compiled
 * one in dist/, built before the run, and these sources), as when a handler module imports
 * another install of the package than the one that runs it.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import { createLogger } from '../logger.ts';
import { runHandler } from './run-handler.ts';
import {
  type BatchContext,
  type BatchHandler,
  defineHandler,
  type ItemContext,
  ItemError,
  type ItemHandler,
  RetryableError,
} from './types.ts';

type TypesModule = typeof import('./types.ts');
const compiledUrl = new URL('../../dist/handlers/types.js', import.meta.url).href;

describe('defineHandler', () => {
  it('returns the handler as given, with its arguments typed', () => {
    const handler = defineHandler({
      type: 'send_sms',
      concurrency: 2,
      async handle(itemId, ctx) {
        expectTypeOf(itemId).toEqualTypeOf<string>();
        expectTypeOf(ctx).toEqualTypeOf<ItemContext>();
      },
    });
    expectTypeOf(handler).toEqualTypeOf<ItemHandler>();
    const batch = defineHandler({
      type: 'bulk',
      async handleBatch(itemIds, ctx) {
        expectTypeOf(itemIds).toEqualTypeOf<readonly string[]>();
        expectTypeOf(ctx).toEqualTypeOf<BatchContext>();
        return itemIds.map((id) => ({ id, status: 'completed' as const }));
      },
    });
    expectTypeOf(batch).toEqualTypeOf<BatchHandler>();
    expect(handler.type).toBe('send_sms');
  });

  it('refuses a misspelt setting and a handler without handle or handleBatch (at compile time)', () => {
    // @ts-expect-error: "concurency" is not a setting.
    defineHandler({ type: 'x', concurency: 2, async handle() {} });
    // @ts-expect-error: a handler needs handle or handleBatch.
    defineHandler({ type: 'x' });
  });
});

describe('ItemError and RetryableError across two copies of opspad', () => {
  it('answer instanceof for instances of the other copy, and keep subclasses apart', async () => {
    const compiled = (await import(compiledUrl)) as TypesModule;
    expect(compiled.ItemError).not.toBe(ItemError);
    expect(new compiled.ItemError('x')).toBeInstanceOf(ItemError);
    expect(new ItemError('x')).toBeInstanceOf(compiled.ItemError);
    expect(new compiled.RetryableError('x', 5)).toBeInstanceOf(RetryableError);
    expect(new ItemError('x')).not.toBeInstanceOf(RetryableError);
    expect(new Error('x')).not.toBeInstanceOf(ItemError);
    expect(new ItemError('x')).toBeInstanceOf(Error);

    class NoPhone extends ItemError {}
    expect(new NoPhone('no phone')).toBeInstanceOf(ItemError);
    expect(new ItemError('x')).not.toBeInstanceOf(NoPhone);
  });

  it('fail an item at once when the handler throws the other copy’s ItemError', async () => {
    const compiled = (await import(compiledUrl)) as TypesModule;
    let calls = 0;
    const outcome = await runHandler(
      {
        type: 'sms',
        attempts: 5,
        backoffMs: 0,
        async handle() {
          calls += 1;
          throw new compiled.ItemError('no phone number');
        },
      },
      ['c1'],
      {
        operationId: 'op',
        organizationId: 'org',
        operationType: 'sms',
        queryParams: {},
        signal: new AbortController().signal,
        logger: createLogger('silent'),
      },
    );
    expect(outcome.failed).toEqual([{ id: 'c1', reason: 'no phone number' }]);
    expect(calls).toBe(1);
  });
});
