/**
 * Reading the repository for the docs' tests: its files by path, the Markdown pages of its docs,
 * and their headings' anchors as GitHub makes them. Pure file reads: no database, no build.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
export const exists = (path: string) => existsSync(join(ROOT, path));

/** Files under `dir` (relative to the root) whose name passes `keep`, skipping node_modules. */
export function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  const out: string[] = [];
  const walk = (path: string) => {
    for (const name of readdirSync(join(ROOT, path))) {
      const child = join(path, name);
      if (name === 'node_modules' || name.startsWith('.')) {
        continue;
      }
      if (statSync(join(ROOT, child)).isDirectory()) {
        walk(child);
      } else if (keep(name)) {
        out.push(relative(ROOT, join(ROOT, child)));
      }
    }
  };
  walk(dir);
  return out.sort();
}

/** The README, the changelog and every page of docs/. */
export const markdownPages = () => ['README.md', 'CHANGELOG.md', ...filesUnder('docs', (name) => name.endsWith('.md'))];

/** The text outside fenced code blocks (links and headings in code are not links or headings). */
export const prose = (markdown: string) => markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes, repeats numbered. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, title] of prose(markdown).matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const base = (title ?? '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}
