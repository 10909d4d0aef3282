/**
 * docker-compose.yml, checked as data (no Docker engine runs tests): Postgres, Redis, the API and
 * two worker processes, each with a healthcheck or a dependency on a healthy service, all on one
 * database and one Redis; the image runs the opspad command, which applies migrations at start.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/env.ts';

const root = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));

interface Service {
  image?: string;
  build?: string;
  command?: string[];
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  deploy?: { replicas?: number };
  stop_grace_period?: string;
}

describe('docker-compose.yml', () => {
  const compose = parse(readFileSync(root('docker-compose.yml'), 'utf8')) as { services: Record<string, Service> };
  const { postgres, redis, app, worker } = compose.services;

  it('runs Postgres, Redis, the API and two workers', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['app', 'postgres', 'redis', 'worker']);
    expect(postgres?.image).toMatch(/^postgres:/);
    expect(redis?.image).toMatch(/^redis:/);
    expect(app?.build).toBe('.');
    expect(worker?.command).toEqual(['node', 'bin/opspad.js', 'worker']);
    expect(worker?.deploy?.replicas).toBe(2);
  });

  it('has healthchecks, and starts each part only once what it needs is healthy', () => {
    expect(postgres?.healthcheck?.test.join(' ')).toContain('pg_isready');
    expect(redis?.healthcheck?.test.join(' ')).toContain('ping');
    expect(app?.healthcheck?.test.join(' ')).toContain('/readyz');
    expect(app?.depends_on).toEqual({
      postgres: { condition: 'service_healthy' },
      redis: { condition: 'service_healthy' },
    });
    expect(worker?.depends_on).toEqual({ app: { condition: 'service_healthy' } });
  });

  it('points the API and the workers at the same database and Redis', () => {
    expect(worker?.environment?.DATABASE_URL).toBe(app?.environment?.DATABASE_URL);
    expect(worker?.environment?.REDIS_URL).toBe(app?.environment?.REDIS_URL);
    expect(app?.environment?.DATABASE_URL).toMatch(/^postgres:\/\/opspad:opspad@postgres:5432\/opspad$/);
    expect(app?.environment?.HOST).toBe('0.0.0.0');
  });

  it('builds an image that runs opspad start (which applies the migrations) from the sources', () => {
    const dockerfile = readFileSync(root('Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/^FROM node:20/m);
    expect(dockerfile).toContain('COPY drizzle ./drizzle');
    expect(dockerfile).toContain('CMD ["node", "bin/opspad.js", "start"]');
  });

  it("gives opspad's processes longer than their shutdown bound before Docker's SIGKILL", () => {
    const bound = loadConfig({}).OPSPAD_SHUTDOWN_TIMEOUT;
    for (const service of [app, worker]) {
      const grace = /^(\d+)s$/.exec(service?.stop_grace_period ?? '')?.[1];
      expect(Number(grace) * 1000).toBeGreaterThan(bound);
    }
  });
});
