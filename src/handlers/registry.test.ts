/** Handler registration: validation, overrides, rate-limited batch sizes, module loading. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createHandlerRegistry, loadHandlerModules } from './registry.ts';
import type { ItemHandler } from './types.ts';

const noop = async () => {};

describe('createHandlerRegistry', () => {
  it('knows registered types, and a later handler replaces an earlier one of the same type', () => {
    const first: ItemHandler = { type: 'sms', handle: noop };
    const second: ItemHandler = { type: 'sms', concurrency: 9, handle: noop };
    const registry = createHandlerRegistry([first, second, { type: 'email', handle: noop }]);
    expect(registry.types).toEqual(['sms', 'email']);
    expect(registry.get('sms')?.concurrency).toBe(9);
    expect(registry.has('fax')).toBe(false);
  });

  it('refuses a type that cannot name a queue, and settings out of range, naming them', () => {
    expect(() => createHandlerRegistry([{ type: 'a:b', handle: noop }])).toThrow(/type: must be 1 to 64 letters/);
    expect(() => createHandlerRegistry([{ type: 'ok', concurrency: 0, handle: noop }])).toThrow(/concurrency/);
    expect(() => createHandlerRegistry([{ type: 'ok', itemConcurrency: 1001, handle: noop }])).toThrow(
      /itemConcurrency/,
    );
    expect(() => createHandlerRegistry([{ type: 'ok' } as ItemHandler])).toThrow(/needs a handle/);
    expect(() => createHandlerRegistry([{ type: 'ok', batchTimeoutMs: 0, handle: noop }])).toThrow(/batchTimeoutMs/);
    expect(() => createHandlerRegistry([{ type: 'ok', batchTimeoutMs: 1.5, handle: noop }])).toThrow(/batchTimeoutMs/);
  });

  it('gives a rate-limited handler a fixed batch size, keeping its methods', () => {
    class Sms implements ItemHandler {
      readonly type = 'sms';
      readonly rateLimit = { max: 30, durationMs: 1000 };
      async handle() {}
    }
    const registered = createHandlerRegistry([new Sms()]).get('sms') as ItemHandler;
    expect(registered.batchSize).toBe(30);
    expect(typeof registered.handle).toBe('function');
  });
});

describe('loadHandlerModules', () => {
  const dir = mkdtempSync(join(tmpdir(), 'opspad-handlers-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('loads a default export and a `handlers` array', async () => {
    writeFileSync(join(dir, 'one.mjs'), `export default { type: 'one', async handle() {} };`);
    writeFileSync(
      join(dir, 'many.mjs'),
      `export const handlers = [{ type: 'two', async handle() {} }, { type: 'three', async handleBatch() { return []; } }];`,
    );
    const loaded = await loadHandlerModules(['one.mjs', 'many.mjs'], dir);
    expect(loaded.map((h) => h.type)).toEqual(['one', 'two', 'three']);
  });

  it('says what a module must export when it exports something else', async () => {
    writeFileSync(join(dir, 'wrong.mjs'), 'export default 42;');
    await expect(loadHandlerModules(['wrong.mjs'], dir)).rejects.toThrow(/must export a handler/);
  });

  it('names a module that does not exist, and where paths are resolved from', async () => {
    await expect(loadHandlerModules(['missing.mjs'], dir)).rejects.toThrow(
      `OPSPAD_HANDLERS: missing.mjs does not exist (paths are relative to ${dir}).`,
    );
  });
});
