/**
 * Once per test run, before anything else: compile src/ into dist/ (scripts/build.mjs), since
 * `bin/opspad.js` runs the compiled code. A test that starts an `opspad` process then always runs
 * the sources as they are now, never a stale build. dist/ is overwritten in place, not removed,
 * so a run beside this one keeps working.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BUILD = fileURLToPath(new URL('../../scripts/build.mjs', import.meta.url));

export default function setup(): void {
  const built = spawnSync(process.execPath, [BUILD, '--no-clean'], { encoding: 'utf8', timeout: 300_000 });
  if (built.status !== 0) {
    throw new Error(`The build the tests run against failed (node scripts/build.mjs):\n${built.stderr}${built.stdout}`);
  }
}
