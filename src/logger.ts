/**
 * Structured JSON logs (pino); human-readable when stdout is a terminal. Every logger writes
 * through the process's one stdout sink (src/log-sink.ts): a stalled or closed stdout makes
 * logging drop lines (counted), never block the event loop or the exit.
 */
import { type Logger, pino } from 'pino';
import { stdoutLogSink } from './log-sink.ts';

export type { Logger };

export function createLogger(level: string, name = 'opspad'): Logger {
  return pino({ name, level }, stdoutLogSink());
}
