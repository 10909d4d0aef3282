/** `--url`: the address of a running opspad, as the commands that talk to one take it. */
import { InvalidArgumentError } from 'commander';

export function httpUrl(value: string): string {
  try {
    if (['http:', 'https:'].includes(new URL(value).protocol)) {
      return value.replace(/\/$/, '');
    }
  } catch {
    // reported below
  }
  throw new InvalidArgumentError('It must be a URL starting with http:// or https://.');
}
