/**
 * Which Redis the configuration names (REDIS_URL or REDIS_CLUSTER_NODES), how bad cluster
 * settings are refused without echoing credentials, and the key prefix on each: unchanged on one
 * Redis (existing deployments keep their keys), hash-tagged on a cluster.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../config/env.ts';
import { assertRedisReachable } from './connection.ts';
import { describeRedisTarget, redisKeyPrefix, redisTargetOf } from './redis-target.ts';

function problemsOf(env: NodeJS.ProcessEnv): string {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      return error.message;
    }
    throw error;
  }
  throw new Error('expected loadConfig to throw a ConfigError');
}

describe('REDIS_CLUSTER_NODES', () => {
  it('selects the Redis backend on a cluster, with host:port and URL entries as seeds', () => {
    const config = loadConfig({ REDIS_CLUSTER_NODES: ' 10.0.0.1:7000, redis://10.0.0.2:7001 ,,[::1]:7002' });
    expect(config.OPSPAD_QUEUE_BACKEND).toBe('redis');
    expect(config.REDIS_URL).toBeUndefined();
    expect(redisTargetOf(config)).toEqual({
      kind: 'cluster',
      nodes: ['redis://10.0.0.1:7000', 'redis://10.0.0.2:7001', 'redis://[::1]:7002'],
    });
  });

  it('keeps REDIS_URL for one Redis, and the default Redis when only the backend is named', () => {
    expect(redisTargetOf(loadConfig({ REDIS_URL: 'redis://cache:6380' }))).toEqual({
      kind: 'single',
      url: 'redis://cache:6380',
    });
    expect(redisTargetOf(loadConfig({ OPSPAD_QUEUE_BACKEND: 'redis' }))).toEqual({
      kind: 'single',
      url: 'redis://127.0.0.1:6379',
    });
  });

  it('refuses REDIS_URL beside it, naming both', () => {
    expect(problemsOf({ REDIS_URL: 'redis://cache:6379', REDIS_CLUSTER_NODES: '10.0.0.1:7000' })).toContain(
      'REDIS_URL, REDIS_CLUSTER_NODES: set one of them',
    );
  });

  it('refuses entries that are not nodes, and nodes that disagree, without echoing a password', () => {
    expect(problemsOf({ REDIS_CLUSTER_NODES: '10.0.0.1:7000,http://x:secret-pw@10.0.0.2:7000' })).toContain(
      'REDIS_CLUSTER_NODES: entry 2 must be host:port or a URL starting with redis:// or rediss://',
    );
    const mixed = problemsOf({ REDIS_CLUSTER_NODES: 'redis://:secret-pw@a:7000,rediss://:secret-pw@b:7000' });
    expect(mixed).toContain('REDIS_CLUSTER_NODES: the nodes must all use redis:// or all rediss://');
    expect(mixed).not.toContain('secret-pw');
    expect(problemsOf({ REDIS_CLUSTER_NODES: ' , ' })).toContain('REDIS_CLUSTER_NODES: must name at least one node');
  });

  it('describes the cluster without its password', () => {
    const config = loadConfig({ REDIS_CLUSTER_NODES: 'redis://default:secret-pw@a:7000,b:7001' });
    const described = describeRedisTarget(redisTargetOf(config));
    expect(described).toBe('The Redis Cluster at redis://default:***@a:7000, redis://b:7001');
  });
});

describe('redisKeyPrefix', () => {
  it('hash-tags the prefix on a cluster and leaves it as it was on one Redis', () => {
    expect(redisKeyPrefix({ kind: 'cluster', nodes: ['redis://a:7000'] }, 'opspad')).toBe('{opspad}');
    expect(redisKeyPrefix({ kind: 'single', url: 'redis://a:6379' }, 'opspad')).toBe('opspad');
  });
});

describe('assertRedisReachable on a cluster', () => {
  it('says which setting names the cluster nobody answers at, and what to do', async () => {
    await expect(assertRedisReachable({ kind: 'cluster', nodes: ['redis://127.0.0.1:1'] }, 2000)).rejects.toThrow(
      /^The Redis Cluster at redis:\/\/127\.0\.0\.1:1 is not reachable .*set REDIS_CLUSTER_NODES to one that runs, or unset both to keep the jobs in Postgres\.$/,
    );
  });
});
