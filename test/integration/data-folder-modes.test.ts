/**
 * The embedded database's folder is its user's alone after `opspad start`, whatever the umask:
 * every folder 0700, every file 0600 (PGlite's own files, which it creates 0666, included), the
 * control socket 0600. A start on a folder others may enter is refused, saying how to fix it,
 * unless --allow-open-data-dir, which makes it private and goes on.
 */
import { chmodSync, lstatSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { killAllChildren, runOpspad, spawnOpspad } from '../helpers/processes.ts';
import { freePort } from '../helpers/stdout-readers.ts';

afterEach(killAllChildren);

/** Every entry under `dir` with its permission bits, e.g. `pglite/base/1/1259 600`. */
function modes(dir: string, prefix = ''): { path: string; mode: number; kind: 'folder' | 'file' | 'socket' }[] {
  const found: { path: string; mode: number; kind: 'folder' | 'file' | 'socket' }[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    const stat = lstatSync(path);
    const kind = stat.isDirectory() ? 'folder' : stat.isSocket() ? 'socket' : 'file';
    found.push({ path: `${prefix}${entry}`, mode: stat.mode & 0o777, kind });
    if (stat.isDirectory()) {
      found.push(...modes(path, `${prefix}${entry}/`));
    }
  }
  return found;
}

function expectPrivate(dataDir: string): void {
  expect(lstatSync(dataDir).mode & 0o777).toBe(0o700);
  const entries = modes(dataDir);
  expect(entries.length).toBeGreaterThan(100);
  expect(entries.filter((e) => e.kind === 'socket').map((e) => e.path)).toEqual(['control.sock']);
  const open = entries.filter((e) => e.mode !== (e.kind === 'folder' ? 0o700 : 0o600));
  expect(open.map((e) => `${e.path} ${e.mode.toString(8)}`)).toEqual([]);
}

async function startOn(dataDir: string, args: string[] = []) {
  const port = String(await freePort());
  const service = spawnOpspad('start', ['start', ...args], {
    OPSPAD_DATA_DIR: dataDir,
    OPSPAD_QUEUE_BACKEND: 'postgres',
    PORT: port,
    OPSPAD_LOG_LEVEL: 'info',
  });
  await service.waitForLine((line) => line.includes('opspad API listening'), 'the API to listen', 120_000);
  return service;
}

describe('the embedded data folder', () => {
  it.each([
    ['000', 0o000],
    ['022', 0o022],
  ])(
    'is private after opspad start under umask %s',
    async (_label, umask) => {
      const parent = mkdtempSync(join(tmpdir(), 'opspad-modes-'));
      const dataDir = join(parent, 'data');
      const before = process.umask(umask);
      try {
        const service = await startOn(dataDir);
        expectPrivate(dataDir);
        service.process.kill('SIGTERM');
        expect(await service.waitForExit(60_000)).toEqual({ code: 0, signal: null });
        // What PGlite wrote while running and at its close is private too.
        expect(modes(dataDir).filter((e) => e.kind === 'file' && e.mode !== 0o600)).toEqual([]);
      } finally {
        process.umask(before);
        rmSync(parent, { recursive: true, force: true });
      }
    },
    150_000,
  );

  it('refuses a folder others can read, saying how to fix it; --allow-open-data-dir makes it private', async () => {
    const parent = mkdtempSync(join(tmpdir(), 'opspad-modes-'));
    const dataDir = join(parent, 'data');
    try {
      const first = await startOn(dataDir);
      first.process.kill('SIGTERM');
      await first.waitForExit(60_000);
      chmodSync(dataDir, 0o755);

      const refused = await runOpspad(['start'], {
        OPSPAD_DATA_DIR: dataDir,
        OPSPAD_QUEUE_BACKEND: 'postgres',
        PORT: '0',
      });
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(
        `opspad start: the data folder ${dataDir} (OPSPAD_DATA_DIR) can be read by other users: its mode is 0755.`,
      );
      expect(refused.stderr).toContain(`chmod -R go-rwx ${dataDir}`);
      expect(refused.stderr).toContain('--allow-open-data-dir');

      const allowed = await startOn(dataDir, ['--allow-open-data-dir']);
      expectPrivate(dataDir);
      allowed.process.kill('SIGTERM');
      expect(await allowed.waitForExit(60_000)).toEqual({ code: 0, signal: null });
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  }, 150_000);
});
