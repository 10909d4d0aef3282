/**
 * Structured JSON logs (pino); human-readable when stdout is a terminal.
 */
import { type Logger, pino } from 'pino';

export type { Logger };

export function createLogger(level: string, name = 'opspad'): Logger {
  const pretty = process.stdout.isTTY === true;
  return pino({
    name,
    level,
    ...(pretty ? { transport: { target: 'pino-pretty', options: { colorize: true, ignore: 'pid,hostname' } } } : {}),
  });
}
