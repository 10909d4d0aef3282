/**
 * The embedded database's folder holds every organization's data and webhook secrets, so only
 * the user running opspad may read it: folders 0700, files 0600. PGlite (Emscripten's file
 * system) creates its files 0666 whatever the umask, so the modes are set by walking the folder
 * after PGlite has written (it holds about 1,200 files: a few milliseconds); a folder 0700 keeps
 * a file PGlite adds meanwhile out of others' reach until the next walk.
 */
import { chmodSync, lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

export const PRIVATE_FOLDER_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;
/** The permission bits that let the group or others in. */
const OPEN_BITS = 0o077;

/** Sets `path` and everything under it private (symbolic links are left alone, not followed). */
export function makePrivate(path: string): void {
  const stat = lstatSync(path, { throwIfNoEntry: false });
  if (!stat || stat.isSymbolicLink()) {
    return;
  }
  if (stat.isDirectory()) {
    chmodSync(path, PRIVATE_FOLDER_MODE);
    for (const entry of readdirSync(path)) {
      makePrivate(join(path, entry));
    }
    return;
  }
  if ((stat.mode & 0o777) !== PRIVATE_FILE_MODE) {
    chmodSync(path, PRIVATE_FILE_MODE);
  }
}

/** The folder's mode (e.g. `0755`) when the group or others may enter it; null when private or absent. */
export function openFolderMode(path: string): string | null {
  const stat = lstatSync(path, { throwIfNoEntry: false });
  if (!stat || (stat.mode & OPEN_BITS) === 0) {
    return null;
  }
  return `0${(stat.mode & 0o777).toString(8)}`;
}
