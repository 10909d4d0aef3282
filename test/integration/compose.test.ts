/**
 * docker-compose.yml and the Dockerfile, checked as data (no Docker engine runs tests):
 * Postgres, Redis, the API and two worker processes, each with a healthcheck or a dependency on
 * a healthy service, all on one database and one Redis; the image, built in two stages, runs the
 * compiled opspad command (which applies migrations at start) as an unprivileged user.
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

  it('builds the image opspad start runs in (which applies the migrations)', () => {
    expect(app?.build).toBe('.');
    expect(worker?.build).toBe('.');
  });

  it("gives opspad's processes longer than their shutdown bound before Docker's SIGKILL", () => {
    const bound = loadConfig({}).OPSPAD_SHUTDOWN_TIMEOUT;
    for (const service of [app, worker]) {
      const grace = /^(\d+)s$/.exec(service?.stop_grace_period ?? '')?.[1];
      expect(Number(grace) * 1000).toBeGreaterThan(bound);
    }
  });
});

// ─── The Dockerfile, as data ─────────────────────────────────────────────────────────────────

interface Instruction {
  keyword: string;
  args: string;
}

interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** The stages of a Dockerfile: comments dropped, continued lines joined. */
function dockerfileStages(text: string): Stage[] {
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  const stages: Stage[] = [];
  for (const line of lines) {
    const [keyword = '', ...rest] = line.split(/\s+/);
    const args = rest.join(' ');
    if (keyword.toUpperCase() === 'FROM') {
      const [from = '', as, name] = rest;
      stages.push({ from, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
    } else {
      stages.at(-1)?.instructions.push({ keyword: keyword.toUpperCase(), args });
    }
  }
  return stages;
}

describe('Dockerfile', () => {
  const stages = dockerfileStages(readFileSync(root('Dockerfile'), 'utf8'));
  const [build, runtime] = stages;
  const all = (stage: Stage | undefined, keyword: string) =>
    (stage?.instructions ?? []).filter((i) => i.keyword === keyword).map((i) => i.args);

  it('compiles in a build stage that has the dev dependencies', () => {
    expect(stages.map((s) => s.name)).toEqual(['build', 'runtime']);
    expect(build?.from).toMatch(/^node:20/);
    const runs = all(build, 'RUN');
    expect(runs.some((run) => /\bnpm ci\b/.test(run) && !run.includes('--omit=dev'))).toBe(true);
    expect(runs).toContain('npm run build');
    expect(all(build, 'COPY')).toContain('src ./src');
  });

  it('runs the compiled code as a user without privileges, with production dependencies only', () => {
    expect(runtime?.from).toMatch(/^node:20/);
    expect(all(runtime, 'RUN').some((run) => /\bnpm ci\b.*--omit=dev/.test(run))).toBe(true);
    const copies = all(runtime, 'COPY');
    expect(copies).toContain('--from=build /app/dist ./dist');
    expect(copies).toContain('drizzle ./drizzle');
    expect(copies).toContain('bin ./bin');
    // No sources and no TypeScript toolchain at run time.
    expect(copies.filter((copy) => /\bsrc\b|tsconfig|scripts/.test(copy))).toEqual([]);
    const keywords = (runtime?.instructions ?? []).map((i) => i.keyword);
    expect(all(runtime, 'USER')).toEqual(['node']);
    expect(keywords.lastIndexOf('USER')).toBeLessThan(keywords.indexOf('CMD'));
    expect(all(runtime, 'CMD')).toEqual(['["node", "bin/opspad.js", "start"]']);
    expect(all(runtime, 'ENV').join(' ')).toContain('NODE_ENV=production');
  });

  it('starts a command that runs the compiled CLI, and sends neither node_modules nor dist as context', () => {
    expect(readFileSync(root('bin/opspad.js'), 'utf8')).toContain("import('../dist/cli/main.js')");
    const ignored = readFileSync(root('.dockerignore'), 'utf8').split('\n');
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', 'dist']));
  });
});
