/**
 * The docs that come from the code are the code's: the configuration page and the README's
 * bounds table are what `npm run docs:generate` writes from src/config/settings-parts.ts, every
 * setting has a description, and the page lists every setting.
 */
import { describe, expect, it } from 'vitest';
import { generatedFiles, settingDocs } from '../../scripts/docs/settings-tables.ts';
import { SETTINGS_PARTS } from '../../src/config/settings-parts.ts';
import { read } from './repository.ts';

/** The lines of a page, table cells without their padding: the formatter's layout is not content. */
const layoutFree = (text: string) =>
  text
    .split('\n')
    .map((line) => (line.startsWith('|') ? line.replace(/ *\| */g, ' | ').replace(/-{3,}/g, '---') : line));

describe('generated docs', () => {
  it('commits the tables the settings generate (run `npm run docs:generate` after changing a setting)', () => {
    for (const { path, text } of generatedFiles(read)) {
      expect(
        layoutFree(read(path)),
        `${path} differs from what the settings generate: run npm run docs:generate`,
      ).toEqual(layoutFree(text));
    }
  });

  it('describes every setting in one sentence, and names what each bound bounds', () => {
    const settings = settingDocs();
    const declared = Object.values(SETTINGS_PARTS).flatMap((part) => Object.keys(part.schema.shape));
    expect(settings.map((s) => s.name).sort()).toEqual([...new Set(declared)].sort());
    for (const setting of settings) {
      expect(setting.description, setting.name).toMatch(/^[`A-Z].*[.)]$/s);
      expect(setting.description.length, setting.name).toBeLessThanOrEqual(200);
    }
    const bounds = settings.filter((s) => s.bound !== undefined).map((s) => s.name);
    expect(bounds).toEqual(
      expect.arrayContaining(['OPSPAD_MAX_ITEMS', 'OPSPAD_RATE_LIMIT', 'OPSPAD_MAX_ACTIVE_BACKGROUND']),
    );
  });

  it('lists every setting on the configuration page, once', () => {
    const page = read('docs/configuration.md');
    for (const { name } of settingDocs()) {
      expect(page.match(new RegExp(`^\\| \`${name}\` +\\|`, 'gm')), name).toHaveLength(1);
    }
  });
});
