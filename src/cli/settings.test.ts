/**
 * Each command reads only its own settings: a variable it never uses cannot stop it, and those
 * it does use are checked as strictly as ever, naming the variable.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../config/env.ts';
import { COMMAND_SETTINGS, type SettingsCommand, settingsFor } from './settings.ts';

const COMMANDS = Object.keys(COMMAND_SETTINGS) as SettingsCommand[];

function problemsOf(command: SettingsCommand, env: NodeJS.ProcessEnv): readonly string[] {
  try {
    settingsFor(command, env);
    return [];
  } catch (error) {
    if (error instanceof ConfigError) {
      return error.problems;
    }
    throw error;
  }
}

describe('settingsFor', () => {
  it('checks the admin password only where the operator surfaces are served or signed in to', () => {
    const short = { OPSPAD_ADMIN_PASSWORD: 'abc' };
    const refusing = COMMANDS.filter((command) => problemsOf(command, short).length > 0);
    // The bulk commands sign in to a running server, which never accepts a shorter one.
    expect(refusing).toEqual(['start', 'ops pause', 'ops resume', 'ops cancel', 'ops retry-failed']);
    expect(problemsOf('start', short)).toEqual([
      'OPSPAD_ADMIN_PASSWORD: must be at least 8 characters: choose a longer one, or unset it for a random one printed at start',
    ]);
    expect(problemsOf('start', { OPSPAD_ADMIN_PASSWORD: '12345678' })).toEqual([]);
  });

  it('checks a worker’s admin password only when its metrics port asks for the operator sign-in', () => {
    expect(problemsOf('worker', { OPSPAD_ADMIN_PASSWORD: 'abc' })).toEqual([]);
    expect(problemsOf('worker', { OPSPAD_ADMIN_PASSWORD: 'abc', OPSPAD_METRICS_PORT: '9464' })).toEqual([
      'OPSPAD_ADMIN_PASSWORD: must be at least 8 characters: choose a longer one, or unset it for a random one printed at start',
    ]);
    const withPort = settingsFor('worker', { OPSPAD_METRICS_PORT: '9464', OPSPAD_ADMIN_PASSWORD: '12345678' });
    expect(withPort).toMatchObject({ OPSPAD_ADMIN_USER: 'admin', OPSPAD_ADMIN_PASSWORD: '12345678' });
    expect(settingsFor('worker', {})).not.toHaveProperty('OPSPAD_ADMIN_USER');
  });

  it('reads the database settings where a database is opened, and not in client commands', () => {
    const bad = { DATABASE_URL: 'mysql://db' };
    const refusing = COMMANDS.filter((command) => problemsOf(command, bad).length > 0);
    expect(refusing.sort()).toEqual(['demo', 'keys', 'migrate', 'oauth', 'orgs', 'start', 'webhooks', 'worker']);
    expect(problemsOf('migrate', bad)).toEqual([
      'DATABASE_URL: must be a URL starting with postgres:// or postgresql://',
    ]);
  });

  it('refuses a removed webhook variable in the commands that deal with webhooks', () => {
    const removed = { OPSPAD_WEBHOOK_SECRET: 'whsec_old' };
    const refusing = COMMANDS.filter((command) => problemsOf(command, removed).length > 0);
    expect(refusing.sort()).toEqual(['start', 'webhooks', 'worker']);
  });

  it('gives each command the defaults of what it reads, and only that', () => {
    expect(settingsFor('mcp', { OPSPAD_URL: 'http://api.internal:8080' })).toEqual({
      PORT: 3000,
      HOST: '127.0.0.1',
      OPSPAD_URL: 'http://api.internal:8080',
    });
    expect(settingsFor('migrate', { REDIS_URL: 'redis://cache:6379' })).toEqual({
      OPSPAD_DATA_DIR: './.opspad',
      OPSPAD_PG_POOL_SIZE: 10,
      REDIS_URL: 'redis://cache:6379',
      OPSPAD_QUEUE_BACKEND: 'redis',
      OPSPAD_QUEUE_PREFIX: 'opspad',
    });
  });

  it('covers every variable: start, the client commands and webhooks together read all of loadConfig', () => {
    const read = new Set(
      (['start', 'mcp', 'webhooks'] as const).flatMap((command) => Object.keys(settingsFor(command, {}))),
    );
    expect([...read].sort()).toEqual(Object.keys(loadConfig({})).sort());
  });
});
