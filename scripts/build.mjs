#!/usr/bin/env node
/**
 * `npm run build`: compiles src/ into dist/ (ESM JavaScript, .d.ts and source maps) with tsc, and
 * copies the server-side SQL functions' files (src/store/<folder>/sql/*.sql, which the migrator
 * applies) beside the compiled store, and the API reference page's renderer (Redoc's standalone
 * bundle and its licences) into dist/vendor/redoc/, where the server's /docs serves it from. The tests build the same way first
 * (test/helpers/build.ts), so a test that starts `opspad` never runs stale code.
 *
 * tsc rather than a bundler: the output is the sources file for file (stack traces and source
 * maps point at the modules the repository has), the .d.ts files come from the same compiler that
 * typechecks, and nothing is bundled that npm already installs.
 *
 * Usage: node scripts/build.mjs [--no-clean]   (--no-clean keeps dist/ and overwrites in place)
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(join(ROOT, 'package.json'));

/**
 * Redoc's side menu ends with a "API docs by Redocly" link whose logo it loads from its CDN: the
 * one request the page would make to another origin. The copy served here loads no logo (an
 * empty src, on which Redoc hides the image); the link stays. Exactly one occurrence is
 * expected, so an upgrade of Redoc that moves it fails the build instead of phoning home.
 */
const REDOC_LOGO = '"https://cdn.redoc.ly/redoc/logo-mini.svg"';

/** Where each Redoc file comes from (in node_modules/redoc) and goes to (in dist/vendor/redoc). */
const REDOC_FILES = [
  ['bundles/redoc.standalone.js', 'redoc.standalone.js'],
  ['bundles/redoc.standalone.js.LICENSE.txt', 'redoc.standalone.js.LICENSE.txt'],
  ['LICENSE', 'LICENSE'],
];

export function build({ clean = true } = {}) {
  const dist = join(ROOT, 'dist');
  if (clean) {
    rmSync(dist, { recursive: true, force: true });
  }
  const tsc = join(dirname(require.resolve('typescript/package.json')), 'bin', 'tsc');
  const compiled = spawnSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json')], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
  });
  if (compiled.status !== 0) {
    throw new Error(`tsc -p tsconfig.build.json failed:\n${compiled.stdout}${compiled.stderr}`);
  }
  copySqlFunctions(dist);
  const redoc = dirname(require.resolve('redoc/package.json'));
  const vendor = join(dist, 'vendor', 'redoc');
  mkdirSync(vendor, { recursive: true });
  for (const [from, to] of REDOC_FILES) {
    copyFileSync(join(redoc, from), join(vendor, to));
  }
  const bundle = join(vendor, 'redoc.standalone.js');
  const source = readFileSync(bundle, 'utf8');
  const occurrences = source.split(REDOC_LOGO).length - 1;
  if (occurrences !== 1) {
    throw new Error(
      `expected Redoc's logo URL once in its bundle, found it ${occurrences} times: check scripts/build.mjs`,
    );
  }
  writeFileSync(bundle, source.replace(REDOC_LOGO, '""'));
}

/** src/store/<folder>/sql/*.sql → dist/store/<folder>/sql/. */
function copySqlFunctions(dist) {
  const store = join(ROOT, 'src', 'store');
  for (const folder of readdirSync(store, { withFileTypes: true })) {
    const from = join(store, folder.name, 'sql');
    if (!folder.isDirectory() || !readdirSync(join(store, folder.name)).includes('sql')) {
      continue;
    }
    const to = join(dist, 'store', folder.name, 'sql');
    mkdirSync(to, { recursive: true });
    for (const file of readdirSync(from).filter((name) => name.endsWith('.sql'))) {
      copyFileSync(join(from, file), join(to, file));
    }
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    build({ clean: !process.argv.includes('--no-clean') });
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
}
