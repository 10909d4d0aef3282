/**
 * The settings module is the only reader of the environment: code outside src/config/ never
 * reads `process.env` itself (it may only hand the whole object to the settings parser), and
 * every variable the code or the docs name is a declared setting — so nothing read can be
 * missing from the configuration page.
 */
import { describe, expect, it } from 'vitest';
import { SETTINGS_PARTS } from '../../src/config/settings-parts.ts';
import { filesUnder, markdownPages, read } from './repository.ts';

const declared = new Set(Object.values(SETTINGS_PARTS).flatMap((part) => Object.keys(part.schema.shape)));
/** Variables refused because they were removed: code and docs name them to say so. */
const removed = new Set(Object.values(SETTINGS_PARTS).flatMap((part) => Object.keys(part.removed ?? {})));

/** Files that may pass `process.env` whole to the settings parser as the default environment. */
const HANDS_ENV_TO_SETTINGS = new Set(['src/config/env.ts', 'src/cli/settings.ts', 'src/index.ts']);

/** Product code: what ships (src/, bin/), tests excluded. */
const productFiles = () => [
  ...filesUnder('src', (name) => name.endsWith('.ts') && !name.endsWith('.test.ts')),
  ...filesUnder('bin', (name) => name.endsWith('.js')),
];

const withoutComments = (code: string) => code.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

/** Names shaped like opspad's variables: OPSPAD_*, OTEL_*, DATABASE_*, REDIS_* (prefixes like OPSPAD_STREAM_* left out). */
const variableNames = (text: string) =>
  [...text.matchAll(/\b(?:OPSPAD|OTEL|DATABASE|REDIS)_[A-Z0-9_]+/g)]
    .map(([name]) => name)
    .filter((name) => !name.endsWith('_'));

describe('who reads the environment', () => {
  it('reads process.env nowhere but in the settings parser', () => {
    const offenders: string[] = [];
    for (const file of productFiles()) {
      const code = withoutComments(read(file));
      const reads = [
        ...code.matchAll(/process\.env\s*(?:\?\.|\.|\[)/g),
        ...code.matchAll(/\{[^}]*\}\s*=\s*process\.env\b/g),
        ...code.matchAll(/\bprocess\s*\[/g),
        ...code.matchAll(/import\s*\{[^}]*\benv\b[^}]*\}\s*from\s*['"](?:node:)?process['"]/g),
      ];
      if (reads.length > 0 || (/\bprocess\.env\b/.test(code) && !HANDS_ENV_TO_SETTINGS.has(file))) {
        offenders.push(file);
      }
    }
    expect(offenders, 'read settings through src/config/env.ts (loadSettings), not process.env').toEqual([]);
  });

  it('names no variable in the code that is not a declared setting', () => {
    const unknown = productFiles().flatMap((file) =>
      variableNames(read(file))
        .filter((name) => !declared.has(name) && !removed.has(name))
        .map((name) => `${file}: ${name}`),
    );
    expect(unknown, 'declare each variable in src/config/settings-parts.ts').toEqual([]);
  });

  it('documents no variable that is not a setting (or one the tests, the benchmark or the examples read)', () => {
    const examples = new Set(
      filesUnder('examples', (name) => name.endsWith('.ts')).flatMap((file) => variableNames(read(file))),
    );
    const harness = (name: string) => /^OPSPAD_(TEST|BENCH)_/.test(name);
    const unknown = markdownPages().flatMap((page) =>
      variableNames(read(page))
        .filter((name) => !declared.has(name) && !removed.has(name) && !examples.has(name) && !harness(name))
        .map((name) => `${page}: ${name}`),
    );
    expect(unknown).toEqual([]);
  });
});
