/**
 * The server-side SQL functions, each in one file under the store folder that owns it
 * (src/store/<folder>/sql/<name>.sql, copied to dist/ by the build): the file holds the
 * function's current definition, in the form `pg_get_functiondef` prints it, after a comment
 * saying what it does. The migrations keep their history; the migrator's last step applies the
 * files (functionsToApply), so a freshly migrated database runs exactly what the files say, and a
 * test holds the two together.
 *
 * A change of a function's arguments or result type cannot be a CREATE OR REPLACE: a migration
 * drops the old function first, and its file holds the new one.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The store folders that hold functions. */
const FUNCTION_FOLDERS = ['operations', 'leases', 'tenants'] as const;

export interface SqlFunctionFile {
  /** The function's name, the file's name without `.sql`. */
  name: string;
  /** The file's path, for messages. */
  path: string;
  /** The whole file: the comment, then the CREATE OR REPLACE FUNCTION statement. */
  text: string;
}

/** Every function file of the store, by name. */
export function sqlFunctionFiles(): SqlFunctionFile[] {
  const files: SqlFunctionFile[] = [];
  for (const folder of FUNCTION_FOLDERS) {
    const dir = fileURLToPath(new URL(`../${folder}/sql/`, import.meta.url));
    for (const entry of readdirSync(dir).filter((name) => name.endsWith('.sql'))) {
      const path = join(dir, entry);
      files.push({ name: entry.slice(0, -'.sql'.length), path, text: readFileSync(path, 'utf8') });
    }
  }
  return files.sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * A definition as compared: the statement without the file's leading comment lines, without a
 * final semicolon, the function's name unqualified (`pg_get_functiondef` qualifies it with its
 * schema), and every run of whitespace one space.
 */
export function normalizeFunctionDef(text: string): string {
  const lines = text.split('\n');
  const start = lines.findIndex((line) => !line.startsWith('--') && line.trim() !== '');
  return lines
    .slice(start)
    .join('\n')
    .trim()
    .replace(/;$/, '')
    .replace(/^CREATE OR REPLACE FUNCTION [a-z_]+\./, 'CREATE OR REPLACE FUNCTION ')
    .replace(/\s+/g, ' ');
}

/**
 * The newest migration the database has applied, by the time drizzle records for it (its
 * journal entry's `when`); null before any.
 */
export const NEWEST_APPLIED_MIGRATION_SQL = `SELECT max(created_at)::float8 AS newest FROM drizzle.__drizzle_migrations`;

/** The newest migration of a folder's journal (its entries' `when`). */
export function newestKnownMigration(migrationsFolder: string): number {
  const journal = JSON.parse(readFileSync(join(migrationsFolder, 'meta', '_journal.json'), 'utf8')) as {
    entries: { when: number }[];
  };
  return Math.max(...journal.entries.map((entry) => entry.when));
}

/**
 * Whether this process's function files may be applied: not when the database has applied a
 * migration this process does not know. A newer release migrated it, and its functions (their
 * arguments, the columns they write) are the ones its tables need: a process of an older release
 * starting beside it must not put its own back.
 */
export function mayApplyFunctions(newestApplied: number | null, migrationsFolder: string): boolean {
  return newestApplied === null || newestApplied <= newestKnownMigration(migrationsFolder);
}

/** The statement listing the database's opspad functions with their definitions. */
export const LIST_FUNCTIONS_SQL = `SELECT p.proname AS name, pg_get_functiondef(p.oid) AS definition
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
  WHERE n.nspname = current_schema() AND p.proname LIKE 'opspad\\_%'
  ORDER BY p.proname`;

/**
 * The files whose definition differs from the database's (or that it lacks): replacing only
 * those leaves the plans cached by running sessions alone when nothing changed.
 */
export function functionsToApply(
  current: readonly { name: string; definition: string }[],
  files: readonly SqlFunctionFile[] = sqlFunctionFiles(),
): SqlFunctionFile[] {
  const have = new Map(current.map((row) => [row.name, normalizeFunctionDef(row.definition)]));
  return files.filter((file) => have.get(file.name) !== normalizeFunctionDef(file.text));
}
