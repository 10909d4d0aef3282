/**
 * The tables of the docs that come from the code: the configuration page (every setting of
 * src/config/settings-parts.ts, by part, with its default and its meta's description), which
 * command reads which parts (src/cli/settings.ts), and the README's bounds table (every setting
 * whose meta names a `bound`). Pure: it reads no file and no environment; scripts/generate-docs.ts
 * writes what it returns, and test/docs/generated.test.ts fails when a committed table differs.
 */
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { COMMAND_SETTINGS } from '../../src/cli/settings.ts';
import { SETTINGS_PARTS } from '../../src/config/settings-parts.ts';

type PartName = keyof typeof SETTINGS_PARTS;

/** Each part's heading on the configuration page (its anchor is what the other tables link to). */
const PART_TITLES: Record<PartName, string> = {
  process: 'Process',
  address: 'HTTP address',
  database: 'Database',
  queue: 'Queue',
  limits: 'Sizes and limits',
  handlers: 'Handlers and webhooks',
  workers: 'Workers',
  reorganizer: 'Scratchpad reorganization',
  api: 'HTTP API',
  hostedMcp: 'Hosted MCP and OAuth',
  signIn: 'Sign-in',
  admin: 'Operator sign-in',
  telemetry: 'Metrics and traces',
  retention: 'Retention',
  webhookSecrets: 'Webhook secrets',
  client: 'Client commands',
};

export interface SettingDoc {
  name: string;
  part: PartName;
  description: string;
  bound?: string;
  /** The default as one would set it (`15s`, `1000/1s`), or `unset`. */
  shownDefault: string;
}

const UNITS = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
] as const;

function durationText(ms: number): string {
  const unit = UNITS.find(([, size]) => ms > 0 && ms % size === 0);
  return unit ? `${ms / unit[1]}${unit[0]}` : `${ms}ms`;
}

/** How a value may be written in the environment, most readable first. */
function spellings(value: unknown): string[] {
  if (typeof value === 'number') {
    return [durationText(value), String(value)];
  }
  if (typeof value === 'boolean' || typeof value === 'string') {
    return [String(value)];
  }
  if (value !== null && typeof value === 'object' && 'max' in value && 'windowMs' in value) {
    return [`${value.max}/${durationText(Number(value.windowMs))}`];
  }
  return [];
}

/**
 * A setting's default, written as one would set it: the first spelling that the setting's own
 * schema parses back to the default, so the page never shows a default the code does not have.
 */
function shownDefault(name: string, schema: z.ZodType): string {
  if (!(schema instanceof z.ZodDefault)) {
    return 'unset';
  }
  const value: unknown = schema.def.defaultValue;
  if (Array.isArray(value) && value.length === 0) {
    return 'none';
  }
  const spelling = spellings(value).find((text) => {
    const parsed = schema.safeParse(text);
    return parsed.success && isDeepStrictEqual(parsed.data, value);
  });
  if (spelling === undefined) {
    throw new Error(`${name}: no spelling of its default (${JSON.stringify(value)}) parses back to it`);
  }
  return spelling;
}

/** Every setting, in the order of the parts and of their shapes. */
export function settingDocs(): SettingDoc[] {
  return (Object.entries(SETTINGS_PARTS) as [PartName, (typeof SETTINGS_PARTS)[PartName]][]).flatMap(
    ([part, { schema }]) =>
      Object.entries(schema.shape as Record<string, z.ZodType>).map(([name, setting]) => {
        const meta = setting.meta();
        const description = meta?.description?.trim();
        if (!description) {
          throw new Error(`${name} has no .meta({ description }) in src/config/settings-parts.ts`);
        }
        if (meta?.bound !== undefined && meta.bound.trim() === '') {
          throw new Error(`${name}: its meta's bound is empty; name the quantity it bounds`);
        }
        return { name, part, description, bound: meta?.bound, shownDefault: shownDefault(name, setting) };
      }),
  );
}

const cell = (text: string) => text.replace(/\|/g, '\\|');
const code = (text: string) => `\`${text}\``;
/** A default as a value to set, or the words for no value. */
const shown = (value: string) => (value === 'unset' || value === 'none' ? value : code(value));

/** GitHub's anchor of a heading made of words and spaces. */
const anchorOf = (title: string) =>
  title
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

/** A Markdown table with its columns padded, as the formatter (Biome) lays tables out. */
function table(header: readonly string[], rows: readonly string[][]): string {
  const widths = header.map((title, c) => Math.max(3, title.length, ...rows.map((row) => (row[c] ?? '').length)));
  const line = (cells: readonly string[]) => `| ${cells.map((text, c) => text.padEnd(widths[c] ?? 0)).join(' | ')} |`;
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...rows.map(line)].join('\n');
}

/** docs/configuration.md, between its `settings` markers: a section and a table per part. */
export function configurationTables(settings: readonly SettingDoc[]): string {
  return (Object.keys(PART_TITLES) as PartName[])
    .map((part) => {
      const rows = settings
        .filter((setting) => setting.part === part)
        .map((s) => [code(s.name), shown(s.shownDefault), cell(s.description)]);
      return `### ${PART_TITLES[part]}\n\n${table(['variable', 'default', 'what it does'], rows)}`;
    })
    .join('\n\n');
}

/** docs/configuration.md, between its `commands` markers: the parts each command reads. */
export function commandTable(): string {
  const rows = Object.entries(COMMAND_SETTINGS).map(([command, parts]) => [
    code(`opspad ${command}`),
    (parts as readonly PartName[]).map((part) => `[${PART_TITLES[part]}](#${anchorOf(PART_TITLES[part])})`).join(', '),
  ]);
  return table(['command', 'reads the settings of'], rows);
}

/** A default for the bounds table: an unset setting's is what its description says unset means. */
const boundDefault = (s: SettingDoc) => {
  const meaning = s.shownDefault === 'unset' ? /\bunset: ([^;.]+)/.exec(s.description)?.[1] : undefined;
  return meaning ? `unset: ${meaning}` : shown(s.shownDefault);
};

/** README.md, between its `bounds` markers: every setting whose meta names a bound. */
export function boundsTable(settings: readonly SettingDoc[]): string {
  const rows = settings
    .filter((setting) => setting.bound !== undefined)
    .map((s) => [
      cell(s.bound ?? ''),
      `[${code(s.name)}](docs/configuration.md#${anchorOf(PART_TITLES[s.part])})`,
      cell(boundDefault(s)),
    ]);
  return table(['quantity', 'setting', 'default'], rows);
}

/** Replaces what lies between `<!-- generated:<name>:start -->` and its end marker. */
export function replaceGenerated(text: string, name: string, body: string, file: string): string {
  const start = `<!-- generated:${name}:start -->`;
  const end = `<!-- generated:${name}:end -->`;
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  if (from < 0 || to < from) {
    throw new Error(`${file} has no ${start} … ${end} markers`);
  }
  return `${text.slice(0, from + start.length)}\n\n${body}\n\n${text.slice(to)}`;
}

/** The files the generator owns a part of, each as it should be, given their current text. */
export function generatedFiles(read: (path: string) => string): { path: string; text: string }[] {
  const settings = settingDocs();
  const configuration = 'docs/configuration.md';
  let page = read(configuration);
  page = replaceGenerated(page, 'settings', configurationTables(settings), configuration);
  page = replaceGenerated(page, 'commands', commandTable(), configuration);
  const readme = replaceGenerated(read('README.md'), 'bounds', boundsTable(settings), 'README.md');
  return [
    { path: configuration, text: page },
    { path: 'README.md', text: readme },
  ];
}
