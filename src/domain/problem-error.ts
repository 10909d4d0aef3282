/**
 * A failure that says what to do about it: `problem` names what was wrong and the setting or
 * option involved ("Postgres at 127.0.0.1:1 (DATABASE_URL) refused the connection"), `remedy`
 * what to do ("Check that Postgres runs there, …"). The `opspad` command prints both in its one
 * shape (src/cli/failure.ts); an embedding app sees them joined in `message`.
 */
export class ProblemError extends Error {
  override readonly name: string = 'ProblemError';
  constructor(
    readonly problem: string,
    readonly remedy: string,
    options?: ErrorOptions,
  ) {
    super(`${sentence(problem)} ${sentence(remedy)}`, options);
  }
}

/** `text` ending as a sentence does: with a full stop unless it has one (or ? or !). */
export function sentence(text: string): string {
  const trimmed = text.trim();
  return /[.?!]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}
