/** A command used wrongly: the CLI prints the message and exits with code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}
