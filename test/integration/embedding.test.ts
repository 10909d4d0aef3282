/**
 * `createOpspad` as the `opspad` package exports it: settings from `env` (not process.env when
 * given), ConfigError naming a bad variable, handlers in code beside the built-ins, API keys made
 * by the embedder, and a graceful close.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.ts';
import { ConfigError, createOpspad, defineHandler } from '../../src/index.ts';
import { embeddedEnv } from '../helpers/embedded-env.ts';

describe('createOpspad from the package entry (postgres)', () => {
  it('refuses an invalid setting with a ConfigError naming it, before opening anything', async () => {
    const refused = createOpspad({ env: { ...embeddedEnv(), PORT: 'eighty' } });
    await expect(refused).rejects.toBeInstanceOf(ConfigError);
    await expect(refused).rejects.toThrow(/PORT: must be a port number/);
  });

  it('runs handlers given in code beside the built-ins, and makes API keys that work', async () => {
    const handled: string[] = [];
    const opspad = await createOpspad({
      env: embeddedEnv(),
      handlers: [
        defineHandler({
          type: 'embedded',
          async handle(itemId) {
            handled.push(itemId);
          },
        }),
      ],
    });
    try {
      expect(opspad.handlerTypes).toEqual(expect.arrayContaining(['webhook', 'demo', 'embedded']));
      expect(opspad.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      await expect(opspad.createApiKey('   ')).rejects.toThrow(TypeError);
      const key = await opspad.createApiKey('embedder');
      expect(key.api_key).toMatch(/^opk_/);
      const client = createClient({ baseUrl: opspad.url ?? '', apiKey: key.api_key });
      const conversation = randomUUID();
      const created = await client.operations.create(conversation, {
        operation_type: 'embedded',
        total_items: 3,
        item_ids: ['x', 'y', 'z'],
      });
      expect(await client.operations.finished(created.operation_id)).toMatchObject({
        status: 'completed',
        completed_count: 3,
      });
      expect(handled.sort()).toEqual(['x', 'y', 'z']);
    } finally {
      await opspad.close();
    }
  });

  it('serves no API with api: false, and then reads none of its settings', async () => {
    // Too short for the operator pages, which this process does not serve: not its concern.
    const opspad = await createOpspad({
      env: { ...embeddedEnv(), OPSPAD_ADMIN_PASSWORD: 'abc' },
      api: false,
      workers: false,
    });
    try {
      expect(opspad.url).toBeUndefined();
    } finally {
      await opspad.close();
    }
    const serving = createOpspad({ env: { ...embeddedEnv(), OPSPAD_ADMIN_PASSWORD: 'abc' }, workers: false });
    await expect(serving).rejects.toBeInstanceOf(ConfigError);
    await expect(serving).rejects.toThrow(/OPSPAD_ADMIN_PASSWORD: must be at least 8 characters/);
  });
});
