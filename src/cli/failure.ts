/**
 * How every `opspad` command fails, in one shape, written by {@link failureText} alone:
 *
 *     opspad <command>: <what was wrong, naming the setting or option>. <what to do>.
 *       <details, one a line, indented>
 *
 * A usage error (exit code 2) adds the command's usage and where its help is. What was wrong and
 * what to do come from the error when it knows them (a {@link ProblemError}: the database,
 * Redis, the port, an organization that does not exist, …), else from its message, with a
 * remedy that says at least where to look.
 */
import { ProblemError, sentence } from '../domain/problem-error.ts';

export { ProblemError };

/**
 * 0 done; 1 failed; 2 used wrongly; 3 a shutdown that ran out of time (process-exit.ts); 130
 * (128 + SIGINT) interrupted with Ctrl-C while following an operation, which goes on.
 */
export const EXIT_CODES = { ok: 0, stepFailed: 1, usage: 2, shutdownTimedOut: 3, interrupted: 130 } as const;

/** A command that cannot go on: printed in the one shape, then the process exits with `exitCode`. */
export class CommandError extends ProblemError {
  override readonly name: string = 'CommandError';
  readonly exitCode: number;
  /** Lines printed under the first, indented (each invalid setting, …). */
  readonly details: readonly string[];
  constructor(problem: string, remedy: string, options: ErrorOptions & { exitCode?: number; details?: string[] } = {}) {
    super(problem, remedy, options);
    this.exitCode = options.exitCode ?? EXIT_CODES.stepFailed;
    this.details = options.details ?? [];
  }
}

/** A command used wrongly (an option, an argument, an invalid setting): exit code 2. */
export class UsageError extends CommandError {
  override readonly name = 'UsageError';
  constructor(problem: string, remedy: string, options: ErrorOptions & { details?: string[] } = {}) {
    super(problem, remedy, { ...options, exitCode: EXIT_CODES.usage });
  }
}

/** The one shape of a failure on stderr (with its final newline). */
export function failureText(command: string, problem: string, remedy: string, details: readonly string[] = []): string {
  return [`${command}: ${sentence(problem)} ${sentence(remedy)}`, ...details.map((line) => `  ${line}`)]
    .join('\n')
    .concat('\n');
}

/** "No organization is named …": the same failure for every command that takes --org. */
export function unknownOrganization(org: string): CommandError {
  return new CommandError(
    `no organization is named "${org}" (--org)`,
    `Check the name, or create the organization with its first key: \`opspad keys create --org ${shellWord(org)}\``,
  );
}

/** `value` as one word of a shell command line: quoted when it holds anything but plain characters. */
export function shellWord(value: string): string {
  return /^[\w.@%+=:,/-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`;
}
