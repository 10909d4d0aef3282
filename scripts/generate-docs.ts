/**
 * `npm run docs:generate`: rewrites the generated tables of the docs from the code — the
 * configuration page's settings and commands (docs/configuration.md) and the README's bounds
 * table — between their `<!-- generated:… -->` markers (scripts/docs/settings-tables.ts), then
 * lets the formatter lay them out as `npm run lint` expects.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generatedFiles } from './docs/settings-tables.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

const files = generatedFiles((file) => readFileSync(join(ROOT, file), 'utf8'));
for (const { path, text } of files) {
  const before = readFileSync(join(ROOT, path), 'utf8');
  if (before !== text) {
    writeFileSync(join(ROOT, path), text);
  }
  process.stdout.write(`${before === text ? 'unchanged' : 'written  '} ${path}\n`);
}
const biome = join(ROOT, 'node_modules', '.bin', 'biome');
const formatted = spawnSync(biome, ['format', '--write', ...files.map((file) => file.path)], {
  cwd: ROOT,
  encoding: 'utf8',
});
if (formatted.status !== 0) {
  process.stderr.write(`biome format failed:\n${formatted.stderr}${formatted.stdout}`);
  process.exitCode = 1;
}
