/**
 * Configuration: every variable has a default; an invalid one fails with a ConfigError that
 * names it, without echoing values that may carry credentials (URLs); an empty variable means
 * "not set".
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './env.ts';

function configErrorOf(env: NodeJS.ProcessEnv): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      return error;
    }
    throw error;
  }
  throw new Error('expected loadConfig to throw a ConfigError');
}

describe('loadConfig', () => {
  it('has a default for every variable', () => {
    expect(loadConfig({})).toEqual({
      PORT: 3000,
      HOST: '127.0.0.1',
      OPSPAD_DATA_DIR: './.opspad',
      OPSPAD_QUEUE_BACKEND: 'postgres',
      OPSPAD_QUEUE_PREFIX: 'opspad',
      OPSPAD_MAX_ITEMS: 1_000_000,
      OPSPAD_MAX_BODY_BYTES: 64 * 1024 * 1024,
      OPSPAD_MAX_QUERY_PARAMS_BYTES: 16_384,
      OPSPAD_MAX_NOTE_BYTES: 65_536,
      OPSPAD_MAX_SCRATCHPAD_BYTES: 262_144,
      OPSPAD_MAX_ITEM_ID_LENGTH: 512,
      OPSPAD_LOG_LEVEL: 'info',
      OPSPAD_PG_POOL_SIZE: 10,
      OPSPAD_HANDLERS: [],
      OPSPAD_WEBHOOK_ALLOW: [],
      OPSPAD_WEBHOOK_CONCURRENCY: 16,
      OPSPAD_WEBHOOK_ITEM_CONCURRENCY: 32,
      OPSPAD_DEMO_CONCURRENCY: 16,
      OPSPAD_WEBHOOK_ROTATION_GRACE: 24 * 3600 * 1000,
      OPSPAD_ADMIN_USER: 'admin',
      OPSPAD_PAUSED_TTL: 7 * 24 * 3600 * 1000,
      OPSPAD_LEASE_TTL: 120_000,
      OPSPAD_RECONCILE_INTERVAL: 15_000,
      OPSPAD_JOB_LOCK_TTL: 30_000,
      OPSPAD_SHUTDOWN_TIMEOUT: 15_000,
      OPSPAD_BATCH_TIMEOUT: 60_000,
      OPSPAD_BATCH_GRACE: 5_000,
      OPSPAD_LANE_SLICE: 1_000,
      OPSPAD_RECITE_MAX_CHARS: 4000,
      OPSPAD_CONTEXT_MAX_TOKENS: 1500,
      OPSPAD_LLM_TIMEOUT: 60_000,
      OPSPAD_REORGANIZE_INTERVAL: 300_000,
      OPSPAD_REORGANIZE_SWEEP_BATCH: 100,
      OPSPAD_RATE_LIMIT: { max: 1000, windowMs: 1000 },
      OPSPAD_MAX_ACTIVE_BACKGROUND: 100,
      OPSPAD_AUTH_FAILURE_LIMIT: { max: 20, windowMs: 60_000 },
      OPSPAD_ADMIN_READONLY: false,
      OPSPAD_MAX_BULK_OPERATIONS: 10_000,
      OPSPAD_MAX_NOTES_PER_SCOPE: 1000,
      OPSPAD_MAX_OPEN_OPERATIONS: 1000,
      OPSPAD_MAX_READ_BYTES: 256 * 1024,
      OPSPAD_MAX_RUNNING_EXECUTIONS: 100,
      OPSPAD_MAX_STORED_ITEMS: 10_000_000,
      OPSPAD_MAX_STREAMS_PER_KEY: 10,
      OPSPAD_STREAM_HEARTBEAT: 15_000,
      OPSPAD_STREAM_IDLE_TIMEOUT: 600_000,
      OPSPAD_STREAM_KEY_CHECK: 5_000,
      OPSPAD_API_KEY_CACHE_TTL: 5_000,
      OPSPAD_METRICS_HOST: '127.0.0.1',
      OPSPAD_MCP_ALLOWED_ORIGINS: [],
      OPSPAD_MCP_MAX_SESSIONS: 1000,
      OPSPAD_MCP_SESSION_IDLE: 24 * 3600 * 1000,
      OPSPAD_OAUTH: true,
      OPSPAD_OAUTH_REFRESH_TTL: 30 * 24 * 3600 * 1000,
      OPSPAD_OAUTH_REGISTRATION_LIMIT: { max: 20, windowMs: 3600 * 1000 },
      OPSPAD_OAUTH_TOKEN_TTL: 3600 * 1000,
      OTEL_SERVICE_NAME: 'opspad',
      OTEL_TRACES_SAMPLER: 'parentbased_always_on',
      OTEL_SDK_DISABLED: false,
      OPSPAD_RETENTION: 30 * 24 * 3600 * 1000,
      OPSPAD_RETENTION_FAILURES: 1000,
      OPSPAD_RETENTION_BATCH: 5000,
      OPSPAD_RETENTION_BUDGET: 5000,
    });
    expect(loadConfig({}).DATABASE_URL).toBeUndefined();
    expect(loadConfig({}).REDIS_URL).toBeUndefined();
  });

  it('keeps the jobs in Redis when REDIS_URL is set, in Postgres otherwise, or where OPSPAD_QUEUE_BACKEND says', () => {
    const url = 'redis://cache.internal:6380';
    expect(loadConfig({ REDIS_URL: url })).toMatchObject({ OPSPAD_QUEUE_BACKEND: 'redis', REDIS_URL: url });
    expect(loadConfig({}).OPSPAD_QUEUE_BACKEND).toBe('postgres');
    expect(loadConfig({ OPSPAD_QUEUE_BACKEND: 'redis' })).toMatchObject({
      OPSPAD_QUEUE_BACKEND: 'redis',
      REDIS_URL: 'redis://127.0.0.1:6379',
    });
    expect(loadConfig({ OPSPAD_QUEUE_BACKEND: 'postgres', REDIS_URL: url }).OPSPAD_QUEUE_BACKEND).toBe('postgres');
    const error = configErrorOf({ OPSPAD_QUEUE_BACKEND: 'kafka' });
    expect(error.message).toContain('OPSPAD_QUEUE_BACKEND: must be redis or postgres (got "kafka")');
  });

  it('reads durations with units and lists separated by commas', () => {
    const config = loadConfig({
      OPSPAD_PAUSED_TTL: '12h',
      OPSPAD_LEASE_TTL: '1.5s',
      OPSPAD_RECONCILE_INTERVAL: '250',
      OPSPAD_HANDLERS: ' ./a.ts, ./b.ts ,',
    });
    expect(config.OPSPAD_PAUSED_TTL).toBe(12 * 3600 * 1000);
    expect(config.OPSPAD_LEASE_TTL).toBe(1500);
    expect(config.OPSPAD_RECONCILE_INTERVAL).toBe(250);
    expect(config.OPSPAD_HANDLERS).toEqual(['./a.ts', './b.ts']);
    expect(() => loadConfig({ OPSPAD_PAUSED_TTL: 'a week' })).toThrow(/OPSPAD_PAUSED_TTL: must be a duration/);
    expect(loadConfig({ OPSPAD_RATE_LIMIT: '600/1m' }).OPSPAD_RATE_LIMIT).toEqual({ max: 600, windowMs: 60_000 });
    expect(() => loadConfig({ OPSPAD_RATE_LIMIT: 'lots' })).toThrow(/OPSPAD_RATE_LIMIT: must look like 1000\/1s/);
  });

  it('reads the tenant-surface bounds: flags, auth-failure limits, trusted proxies', () => {
    const config = loadConfig({
      OPSPAD_ADMIN_READONLY: 'true',
      OPSPAD_AUTH_FAILURE_LIMIT: '5/10s',
      OPSPAD_TRUST_PROXY: 'loopback, 10.0.0.0/8',
      OPSPAD_STREAM_IDLE_TIMEOUT: '2m',
    });
    expect(config.OPSPAD_ADMIN_READONLY).toBe(true);
    expect(config.OPSPAD_AUTH_FAILURE_LIMIT).toEqual({ max: 5, windowMs: 10_000 });
    expect(config.OPSPAD_TRUST_PROXY).toEqual(['loopback', '10.0.0.0/8']);
    expect(config.OPSPAD_STREAM_IDLE_TIMEOUT).toBe(120_000);
    expect(loadConfig({ OPSPAD_TRUST_PROXY: '2' }).OPSPAD_TRUST_PROXY).toBe(2);
    expect(loadConfig({ OPSPAD_ADMIN_READONLY: 'off' }).OPSPAD_ADMIN_READONLY).toBe(false);
    expect(() => loadConfig({ OPSPAD_ADMIN_READONLY: 'maybe' })).toThrow(
      /OPSPAD_ADMIN_READONLY: must be true or false/,
    );
    // Trusting every proxy would let any client pick its own address.
    expect(() => loadConfig({ OPSPAD_TRUST_PROXY: 'true' })).toThrow(/OPSPAD_TRUST_PROXY: must be a number of proxies/);
    expect(() => loadConfig({ OPSPAD_MAX_STREAMS_PER_KEY: '0' })).toThrow(/OPSPAD_MAX_STREAMS_PER_KEY/);
  });

  it('reads the batch budget and its grace as durations', () => {
    const config = loadConfig({ OPSPAD_BATCH_TIMEOUT: '90s', OPSPAD_BATCH_GRACE: '250ms' });
    expect(config.OPSPAD_BATCH_TIMEOUT).toBe(90_000);
    expect(config.OPSPAD_BATCH_GRACE).toBe(250);
    expect(() => loadConfig({ OPSPAD_BATCH_TIMEOUT: '0s' })).toThrow(/OPSPAD_BATCH_TIMEOUT: must be longer than 0/);
  });

  it("reads the built-in handlers' concurrency within 1 to 1000, naming a bad one", () => {
    const config = loadConfig({ OPSPAD_WEBHOOK_CONCURRENCY: '8', OPSPAD_WEBHOOK_ITEM_CONCURRENCY: '64' });
    expect([config.OPSPAD_WEBHOOK_CONCURRENCY, config.OPSPAD_WEBHOOK_ITEM_CONCURRENCY]).toEqual([8, 64]);
    expect(configErrorOf({ OPSPAD_WEBHOOK_ITEM_CONCURRENCY: '1001', OPSPAD_DEMO_CONCURRENCY: '0' }).problems).toEqual([
      expect.stringMatching(/^OPSPAD_WEBHOOK_ITEM_CONCURRENCY: must be at most 1000/),
      expect.stringMatching(/^OPSPAD_DEMO_CONCURRENCY: must be greater than 0/),
    ]);
  });

  it('reads the lane slice as a duration that may be 0 (one batch per job)', () => {
    expect(loadConfig({ OPSPAD_LANE_SLICE: '250ms' }).OPSPAD_LANE_SLICE).toBe(250);
    expect(loadConfig({ OPSPAD_LANE_SLICE: '0' }).OPSPAD_LANE_SLICE).toBe(0);
    expect(() => loadConfig({ OPSPAD_LANE_SLICE: '-1s' })).toThrow(/OPSPAD_LANE_SLICE: must be a duration/);
  });

  it('parses numbers and keeps a valid DATABASE_URL', () => {
    const config = loadConfig({
      PORT: '8080',
      OPSPAD_MAX_ITEMS: '10',
      DATABASE_URL: 'postgres://app@db.internal:5432/opspad',
    });
    expect(config.PORT).toBe(8080);
    expect(config.OPSPAD_MAX_ITEMS).toBe(10);
    expect(config.DATABASE_URL).toBe('postgres://app@db.internal:5432/opspad');
  });

  it.each(['eighty', '70000', '-1', '80.5'])('names PORT when it is %s', (value) => {
    const error = configErrorOf({ PORT: value });
    expect(error.message).toMatch(/^Invalid configuration:\n {2}- PORT: /);
    expect(error.message).toContain(`(got ${JSON.stringify(value)})`);
    expect(error.problems).toHaveLength(1);
  });

  it('keeps OPSPAD_MAX_ITEM_ID_LENGTH within what a B-tree key may hold', () => {
    expect(loadConfig({ OPSPAD_MAX_ITEM_ID_LENGTH: '64' }).OPSPAD_MAX_ITEM_ID_LENGTH).toBe(64);
    expect(configErrorOf({ OPSPAD_MAX_ITEM_ID_LENGTH: '513' }).problems).toEqual([
      'OPSPAD_MAX_ITEM_ID_LENGTH: must be at most 512 (got "513")',
    ]);
  });

  it('names every bad variable at once', () => {
    const error = configErrorOf({ PORT: 'x', OPSPAD_LOG_LEVEL: 'loud', OPSPAD_MAX_ITEMS: '0' });
    expect(error.problems.map((p) => p.split(':')[0]).sort()).toEqual(['OPSPAD_LOG_LEVEL', 'OPSPAD_MAX_ITEMS', 'PORT']);
  });

  it('does not echo a bad DATABASE_URL, which may hold a password', () => {
    const value = 'mysql://admin:hunter2-secret@db.internal/opspad';
    const error = configErrorOf({ DATABASE_URL: value });
    expect(error.message).toContain('DATABASE_URL: must be a URL starting with postgres:// or postgresql://');
    expect(error.message).not.toContain('hunter2');
    expect(error.message).not.toContain('db.internal');
    expect(error.message).not.toContain('got');
  });

  it('does not echo a bad REDIS_URL either', () => {
    const error = configErrorOf({ REDIS_URL: 'http://:redis-password@cache:6379' });
    expect(error.message).toContain('REDIS_URL:');
    expect(error.message).not.toContain('redis-password');
  });

  it('treats an empty variable as unset', () => {
    const config = loadConfig({ PORT: '', DATABASE_URL: '', OPSPAD_LOG_LEVEL: '', REDIS_URL: '' });
    expect(config.PORT).toBe(3000);
    expect(config.DATABASE_URL).toBeUndefined();
    expect(config.OPSPAD_LOG_LEVEL).toBe('info');
    expect(config.REDIS_URL).toBeUndefined();
    expect(config.OPSPAD_QUEUE_BACKEND).toBe('postgres');
  });

  it('reads the webhook allow list and rotation grace, naming a bad allow entry', () => {
    const config = loadConfig({
      OPSPAD_WEBHOOK_ALLOW: '127.0.0.1:8080, 10.0.0.0/8,hooks.internal',
      OPSPAD_WEBHOOK_ROTATION_GRACE: '1h',
    });
    expect(config.OPSPAD_WEBHOOK_ALLOW).toEqual(['127.0.0.1:8080', '10.0.0.0/8', 'hooks.internal']);
    expect(config.OPSPAD_WEBHOOK_ROTATION_GRACE).toBe(3_600_000);
    const error = configErrorOf({ OPSPAD_WEBHOOK_ALLOW: '10.0.0.0/99,https://hooks.internal' });
    expect(error.problems).toEqual([
      expect.stringMatching(/^OPSPAD_WEBHOOK_ALLOW: "10\.0\.0\.0\/99" is not a CIDR range/),
      expect.stringMatching(/^OPSPAD_WEBHOOK_ALLOW: "https:\/\/hooks\.internal" is a URL/),
    ]);
  });

  it('stops on the removed webhook variables, saying what replaced them, without echoing the secret', () => {
    const error = configErrorOf({
      OPSPAD_WEBHOOK_SECRET: 'old-global-secret-value',
      OPSPAD_WEBHOOK_ALLOWED_HOSTS: 'hooks.example.com',
    });
    expect(error.problems).toEqual([
      expect.stringMatching(/^OPSPAD_WEBHOOK_SECRET: was removed: .*opspad webhooks secret --org/),
      expect.stringMatching(/^OPSPAD_WEBHOOK_ALLOWED_HOSTS: was removed: .*OPSPAD_WEBHOOK_ALLOW/),
    ]);
    expect(error.message).not.toContain('old-global-secret-value');
  });

  it('ignores variables it does not know', () => {
    expect(loadConfig({ PATH: '/usr/bin', HOME: '/root' })).toEqual(loadConfig({}));
  });
});

describe('DATABASE_DIRECT_URL', () => {
  it('goes with DATABASE_URL: the pooler it bypasses', () => {
    const direct = 'postgres://opspad:pw@db:5432/opspad';
    expect(
      loadConfig({ DATABASE_URL: 'postgres://opspad:pw@pgbouncer:6432/opspad', DATABASE_DIRECT_URL: direct })
        .DATABASE_DIRECT_URL,
    ).toBe(direct);
    const error = configErrorOf({ DATABASE_DIRECT_URL: direct });
    expect(error.message).toContain('DATABASE_DIRECT_URL: goes with DATABASE_URL');
    expect(error.message).not.toContain('pw@');
  });
});
