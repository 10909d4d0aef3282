/**
 * Loads the peers' driver (peers.ts) for the benchmark, installing this folder's own package from
 * its lockfile the first time (or after the lockfile changed). The import goes through a computed
 * path so the project's typecheck never needs pg-boss or graphile-worker; this folder's
 * tsconfig.json checks peers.ts and the children once they are installed (.ci/run does both).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { PeersModule } from './settings.ts';

const FOLDER = fileURLToPath(new URL('.', import.meta.url));
const LOCKFILE = fileURLToPath(new URL('./package-lock.json', import.meta.url));
/** npm writes it last when an install completes. */
const INSTALLED = fileURLToPath(new URL('./node_modules/.package-lock.json', import.meta.url));

function installed(): boolean {
  return existsSync(INSTALLED) && statSync(INSTALLED).mtimeMs >= statSync(LOCKFILE).mtimeMs;
}

/** Installs the peers when they are missing or stale; throws with the remedy when npm fails. */
export function ensurePeersInstalled(log: (line: string) => void): void {
  if (installed()) {
    return;
  }
  log('installing the peers (bench/scenarios/peers) from their lockfile');
  // Their engines ask for Node 22; they run on the project's Node 20.19, so npm's warning is noise.
  const result = spawnSync('npm', ['ci', '--prefix', FOLDER, '--no-audit', '--no-fund', '--loglevel=error'], {
    stdio: 'inherit',
  });
  if (result.status !== 0) {
    throw new Error(
      `bench: installing the peers failed (npm exit ${result.status ?? result.signal}). Run \`npm ci --prefix bench/scenarios/peers\` and read its output.`,
    );
  }
}

export async function loadPeers(log: (line: string) => void): Promise<PeersModule> {
  ensurePeersInstalled(log);
  const driver = new URL('./peers.ts', import.meta.url).href;
  return (await import(driver)) as PeersModule;
}
