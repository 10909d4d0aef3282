/**
 * The README and docs/ lead somewhere: every relative link and image resolves to a file, every
 * `#anchor` to a heading of its page, and every repository path they name (src/…, test/…,
 * drizzle/…, bench/…) exists. Each page of docs/ links back to the map, and the README stays a
 * front door.
 */
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchorsOf, exists, markdownPages, prose, read } from './repository.ts';

/** Paths the docs name that a run writes and git ignores: they exist once the command has run. */
const WRITTEN_BY_RUNS = new Set([
  'bench/results/latest.json',
  'bench/results/latest-run.json',
  'bench/results/latest.md',
  'bench/results/quick/',
  'bench/results/partial/',
  'bench/results/profiles/',
  'test/artifacts/',
]);

const ROOTS = ['src', 'test', 'drizzle', 'bench', 'docs', 'scripts', 'examples', 'bin'];

/** `[text](target)` and `![alt](target)` outside code, with their targets. */
const linksOf = (markdown: string) =>
  [...prose(markdown).matchAll(/!?\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map(
    ([, target]) => target ?? '',
  );

/** Repository paths a page names, in prose or in code: `src/store/`, `test/docs/links.test.ts`, … */
function repositoryPaths(markdown: string): string[] {
  const pattern = new RegExp(`(?<![\\w./@-])(?:${ROOTS.join('|')})/[\\w./-]*`, 'g');
  return [...markdown.matchAll(pattern)]
    .map(([path]) => path.replace(/[.,:;]+$/, ''))
    .filter((path) => !/[<*{…]/.test(path));
}

describe('the docs lead somewhere', () => {
  const pages = markdownPages();

  it.each(pages)('%s: every relative link and image resolves, anchors included', (page) => {
    const broken: string[] = [];
    for (const target of linksOf(read(page))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
        continue; // https:, mailto: — outside the repository
      }
      const [path = '', anchor] = target.split('#');
      const file = path === '' ? page : normalize(join(dirname(page), decodeURIComponent(path)));
      if (!exists(file)) {
        broken.push(`${target} (no ${file})`);
      } else if (anchor !== undefined && file.endsWith('.md') && !anchorsOf(read(file)).has(anchor)) {
        broken.push(`${target} (no heading #${anchor} in ${file})`);
      }
    }
    expect(broken).toEqual([]);
  });

  it.each(pages)('%s: every repository path it names exists', (page) => {
    const missing = repositoryPaths(read(page)).filter(
      (path) => !exists(path) && !WRITTEN_BY_RUNS.has(path) && !WRITTEN_BY_RUNS.has(`${path}/`),
    );
    expect(missing).toEqual([]);
  });

  it('links each docs page back to the map, after a summary', () => {
    for (const page of pages.filter((p) => p.startsWith('docs/'))) {
      const [title, , summary] = read(page).split('\n');
      expect(title, page).toMatch(/^# \S/);
      expect(summary, `${page} starts with a one-paragraph summary`).toMatch(/^[A-Za-z`*]/);
      expect(read(page), page).toContain('](../README.md#documentation)');
    }
    expect(anchorsOf(read('README.md'))).toContain('documentation');
  });

  it('keeps the README a front door and the performance page a report', () => {
    expect(read('README.md').split('\n').length).toBeLessThanOrEqual(400);
    // The report's table holds every entry of a full run (80 of them).
    expect(read('docs/performance.md').split('\n').length).toBeLessThan(300);
  });

  it('maps every docs page from the README', () => {
    const mapped = new Set(linksOf(read('README.md')).map((target) => target.split('#')[0]));
    const unmapped = pages.filter((page) => page.startsWith('docs/') && !mapped.has(page));
    expect(unmapped).toEqual([]);
  });
});
