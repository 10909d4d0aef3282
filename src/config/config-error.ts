/**
 * The error of an invalid environment, in a module of its own: the CLI recognizes it without
 * loading the schemas (and zod) that `--help` never needs.
 */

/** Thrown when the environment is invalid; the message names every bad variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}
