/**
 * The `opspad` command: parses the arguments (src/cli/program.ts), runs one command, and turns
 * what happened into an exit code and, on failure, one message in the shape of failure.ts:
 * `opspad <command>: <what was wrong>. <what to do>.`
 *
 * Exit codes: 0 done; 1 the command failed (`opspad start: failed at database: Postgres at
 * 127.0.0.1:1 (DATABASE_URL) refused the connection. Check …`); 2 used wrongly — an unknown
 * command or option, a bad option value, a missing argument or option, an invalid setting —
 * with the command's usage under the message; 130 interrupted (Ctrl-C) while following an
 * operation, which goes on. Commands that serve (`start`, `worker`, `demo` when it keeps running)
 * return -1 and exit on a signal instead (src/cli/process-exit.ts).
 */
import { type Command, CommanderError, type Option } from 'commander';
import { ConfigError } from '../config/config-error.ts';
import { describeFailure, StartFailedError } from '../start-steps.ts';
import { CommandError, EXIT_CODES, failureText, ProblemError, UsageError } from './failure.ts';
import { listenProblem } from './port-check.ts';
import { allCommands, buildProgram, commandPath, type ExitCode } from './program.ts';

/** Help and the version were asked for: not an error. */
const ANSWERED = new Set(['commander.helpDisplayed', 'commander.version']);

/** What to do about each of commander's refusals, when it does not say (the usage follows). */
const USAGE_REMEDIES: Readonly<Record<string, string>> = {
  'commander.unknownOption': 'Leave it out; --help lists the options',
  'commander.unknownCommand': '--help lists the commands',
  'commander.missingArgument': 'Give it as the usage below shows',
  'commander.excessArguments': 'Leave out the extra ones, as the usage below shows',
  'commander.optionMissingArgument': 'Give a value after it',
  'commander.missingMandatoryOptionValue': 'Add it, as the usage below shows',
};

/** The usage lines a usage error ends with. */
function usageLines(command: Command): string[] {
  const path = commandPath(command);
  return [`Usage: ${path} ${command.usage()}`, `Run '${path} --help' for more.`];
}

/** `--organization` for `--org`: an option that starts the same way, which commander's spelling check misses. */
function similarOption(command: Command, flag: string): string | undefined {
  const given = flag.split('=')[0] ?? flag;
  return command.options
    .map((option) => option.long)
    .find((long): long is string => !!long && long.length >= 4 && (given.startsWith(long) || long.startsWith(given)));
}

/** One of commander's refusals (`error: unknown option '--bogus'\n(Did you mean …?)`), in the one shape. */
function usageFailure(command: Command, code: string, text: string): string {
  const [first = '', second = ''] = text
    .replace(/^error: /, '')
    .trim()
    .split('\n');
  let problem = first;
  let remedy = USAGE_REMEDIES[code] ?? 'The usage below shows how to use it';
  // commander's own "Did you mean", or one it does not see.
  const flag = /^unknown option '([^']+)'/.exec(first)?.[1];
  const suggested = /^\(Did you mean (.+)\?\)$/.exec(second)?.[1] ?? (flag ? similarOption(command, flag) : undefined);
  if (suggested) {
    remedy = `Did you mean ${suggested}?`;
  }
  // "option '--items <n>' argument '2.5' is invalid. It must be …": what to do is its second sentence.
  const sentences = /^(.*?\.) (.+)$/.exec(first);
  if (code === 'commander.invalidArgument' && sentences?.[1] && sentences[2]) {
    problem = sentences[1];
    remedy = sentences[2];
  }
  return failureText(commandPath(command), problem, remedy, usageLines(command));
}

/** A start step that failed, said with what to do when the cause is one opspad knows. */
function startFailure(error: StartFailedError): ProblemError {
  const cause = error.cause;
  if (cause instanceof ProblemError) {
    return new ProblemError(`failed at ${error.step}: ${cause.problem}`, cause.remedy);
  }
  // Another process took the port between the check before start-up and the listen.
  const at = cause as { address?: unknown; port?: unknown } | undefined;
  const metrics = error.step === 'metrics server';
  const listening = ['HTTP server', 'metrics server'].includes(error.step)
    ? listenProblem(cause, {
        host: String(at?.address ?? ''),
        port: Number(at?.port ?? 0),
        hostVariable: metrics ? 'OPSPAD_METRICS_HOST' : 'HOST',
        portVariable: metrics ? 'OPSPAD_METRICS_PORT' : 'PORT',
      })
    : undefined;
  return new ProblemError(
    `failed at ${error.step}: ${listening?.problem ?? error.reason}`,
    listening?.remedy ?? 'Fix what it names, then start it again',
  );
}

/** "A, B and C". */
function listed(names: readonly string[]): string {
  return names.length > 1 ? `${names.slice(0, -1).join(', ')} and ${names.at(-1)}` : (names[0] ?? '');
}

/** What a failed command prints on stderr, and its exit code. */
function failure(command: Command, error: unknown): { text: string; code: ExitCode } {
  const path = commandPath(command);
  if (error instanceof CommandError) {
    const details = [...error.details, ...(error instanceof UsageError ? usageLines(command) : [])];
    return { text: failureText(path, error.problem, error.remedy, details), code: error.exitCode };
  }
  if (error instanceof ConfigError) {
    const names = error.problems.flatMap((problem) => (problem.split(':')[0] ?? '').split(', '));
    const one = names.length === 1;
    return {
      text: failureText(
        path,
        `${listed(names)} ${one ? 'is' : 'are'} not valid`,
        `Change ${one ? 'it' : 'them'} in the environment, then run \`${path}\` again`,
        error.problems.map((problem) => `- ${problem}`),
      ),
      code: EXIT_CODES.usage,
    };
  }
  const explained =
    error instanceof StartFailedError ? startFailure(error) : error instanceof ProblemError ? error : undefined;
  return {
    text: failureText(
      path,
      explained?.problem ?? describeFailure(error),
      explained?.remedy ?? `Fix what it names, then run \`${path}\` again`,
    ),
    code: EXIT_CODES.stepFailed,
  };
}

/**
 * Mandatory options are checked before the action runs, after unknown options and missing
 * arguments: `keys create --organization acme` is told about --organization, not --org.
 */
function checkMandatoryOptionsLast(command: Command): void {
  const mandatory: Option[] = command.options.filter((option) => option.mandatory);
  for (const option of mandatory) {
    option.mandatory = false;
  }
  command.hook('preAction', (hooked, actionCommand) => {
    if (hooked !== actionCommand) {
      return;
    }
    for (const option of mandatory) {
      if (command.getOptionValue(option.attributeName()) === undefined) {
        command.error(`required option '${option.flags}' not specified`, {
          code: 'commander.missingMandatoryOptionValue',
          exitCode: EXIT_CODES.usage,
        });
      }
    }
  });
}

export async function main(argv: string[]): Promise<number> {
  let code: ExitCode = EXIT_CODES.ok;
  let running: Command | undefined;
  let refused: { command: Command; text: string } | undefined;
  const program = buildProgram(async (run) => {
    code = await run();
  });
  for (const command of allCommands(program)) {
    command.exitOverride();
    // commander's refusal is written below, in the one shape, once its code is known.
    command.configureOutput({
      outputError: (text) => {
        refused ??= { command, text };
      },
    });
    checkMandatoryOptionsLast(command);
    command.hook('preAction', (_, actionCommand) => {
      running = actionCommand;
    });
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
    return code;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (refused) {
        process.stderr.write(usageFailure(refused.command, error.code, refused.text));
        return EXIT_CODES.usage;
      }
      // `opspad help` is an answer; a command group run without its subcommand shows its help
      // on stderr (exit code 1 from commander): a usage error like the others.
      const asked = ANSWERED.has(error.code) || (error.code === 'commander.help' && error.exitCode === 0);
      return asked ? EXIT_CODES.ok : EXIT_CODES.usage;
    }
    const { text, code: failed } = failure(running ?? program, error);
    process.stderr.write(text);
    return failed;
  }
}
