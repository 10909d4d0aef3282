/** Which opspad a client command talks to, and as whom: `--url`/`--key`, else the settings. */
import { UsageError } from './failure.ts';
import type { ClientOptions } from './program.ts';
import { settingsFor } from './settings.ts';

export interface ApiTarget {
  baseUrl: string;
  apiKey: string;
}

export function apiTarget(command: 'ops watch' | 'ops export', options: ClientOptions): ApiTarget {
  const config = settingsFor(command);
  const apiKey = options.key ?? config.OPSPAD_API_KEY;
  if (!apiKey) {
    throw new UsageError(
      'no API key was given',
      'Pass --key <api_key>, or set OPSPAD_API_KEY; `opspad keys create --org <name>` makes one',
    );
  }
  const baseUrl = (options.url ?? config.OPSPAD_URL ?? `http://${config.HOST}:${config.PORT}`).replace(/\/$/, '');
  return { baseUrl, apiKey };
}
