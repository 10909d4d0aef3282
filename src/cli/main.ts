/**
 * The `opspad` command: parses the arguments (src/cli/program.ts), runs one command, and turns
 * what happened into an exit code.
 *
 * Exit codes: 0 done; 1 the command failed (stderr says why: `opspad start failed at <step>:
 * <cause>`, `opspad keys revoke: no API key matches …`); 2 used wrongly — an unknown command or
 * option, a bad option value, a missing argument, an invalid setting — with a message naming the
 * command and a pointer to its `--help`. Commands that serve (`start`, `worker`, `demo` when it
 * keeps running) return -1 and exit on a signal instead (src/cli/process-exit.ts).
 */
import { type Command, CommanderError } from 'commander';
import { ConfigError } from '../config/config-error.ts';
import { StartFailedError } from '../start-steps.ts';
import { EXIT_CODES } from './process-exit.ts';
import { allCommands, buildProgram, commandPath, type ExitCode } from './program.ts';
import { UsageError } from './usage-error.ts';

/** Help and the version were asked for: not an error. */
const ANSWERED = new Set(['commander.helpDisplayed', 'commander.version']);

function hint(command: Command): string {
  const path = commandPath(command);
  return `Usage: ${path} ${command.usage()}\nRun '${path} --help' for more.`;
}

/** What a failed command prints on stderr, and its exit code. */
function failure(command: Command, error: unknown): { message: string; code: ExitCode } {
  const path = commandPath(command);
  if (error instanceof UsageError) {
    return { message: `${path}: ${error.message}\n${hint(command)}`, code: EXIT_CODES.usage };
  }
  if (error instanceof ConfigError) {
    return { message: `${path}: ${error.message}`, code: EXIT_CODES.usage };
  }
  if (error instanceof StartFailedError) {
    return { message: `${path} failed at ${error.step}: ${error.reason}`, code: EXIT_CODES.stepFailed };
  }
  return {
    message: `${path}: ${error instanceof Error ? error.message : String(error)}`,
    code: EXIT_CODES.stepFailed,
  };
}

export async function main(argv: string[]): Promise<number> {
  let code: ExitCode = EXIT_CODES.ok;
  let running: Command | undefined;
  const program = buildProgram(async (run) => {
    code = await run();
  });
  for (const command of allCommands(program)) {
    command.exitOverride();
    command.configureOutput({
      // commander says "error: unknown option '--bogus'"; say which command refused it, and where to look.
      outputError: (text, write) => write(`${commandPath(command)}: ${text.replace(/^error: /, '')}`),
    });
    command.showHelpAfterError(hint(command));
    command.hook('preAction', (_, actionCommand) => {
      running = actionCommand;
    });
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
    return code;
  } catch (error) {
    if (error instanceof CommanderError) {
      // `opspad help` is an answer; a command group run without its subcommand shows its help
      // on stderr (exit code 1 from commander): a usage error like the others.
      const asked = ANSWERED.has(error.code) || (error.code === 'commander.help' && error.exitCode === 0);
      return asked ? EXIT_CODES.ok : EXIT_CODES.usage;
    }
    const { message, code: failed } = failure(running ?? program, error);
    process.stderr.write(`${message}\n`);
    return failed;
  }
}
