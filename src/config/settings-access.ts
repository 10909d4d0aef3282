/**
 * The settings of who may come in: `/mcp` and OAuth for hosted MCP clients, and the bound on
 * failed sign-ins. Parts `hostedMcp` and `signIn` of src/config/settings-parts.ts.
 */
import { duration, flag, list, perWindow, positiveInt, trustProxy, url } from './parsers.ts';

/** `/mcp` and the OAuth flow of hosted MCP clients (src/api/mcp/): read by whatever serves the API. */
export const HOSTED_MCP_SETTINGS = {
  OPSPAD_PUBLIC_URL: url(['http:', 'https:'])
    .refine(
      (value) => ['', '/'].includes(new URL(value).pathname),
      'must be an origin: a scheme, a host and a port, no path',
    )
    .optional()
    .meta({
      description:
        'The address clients reach the API at (e.g. https://opspad.example.com): /mcp refuses other Host and Origin headers, and OAuth names it as issuer; unset: http://HOST:PORT and the loopback names.',
    }),
  OPSPAD_MCP_ALLOWED_ORIGINS: list.default([]).meta({
    description:
      "Comma-separated browser origins, besides OPSPAD_PUBLIC_URL's, whose pages may call /mcp (e.g. http://localhost:6274 for an MCP inspector).",
  }),
  OPSPAD_MCP_MAX_SESSIONS: positiveInt.default(1000).meta({
    description: 'MCP sessions one organization keeps open; opening one more closes its least recently used.',
    bound: 'MCP sessions per organization',
  }),
  OPSPAD_MCP_SESSION_IDLE: duration.default(24 * 3600 * 1000).meta({
    description: 'How long an MCP session may go unused before it ends (its client then opens a new one).',
  }),
  OPSPAD_OAUTH: flag.default(true).meta({
    description:
      'Serve the OAuth authorization flow for hosted MCP clients (the operator grants an organization); needs an https OPSPAD_PUBLIC_URL or a loopback address.',
  }),
  OPSPAD_OAUTH_TOKEN_TTL: duration.default(3600 * 1000).meta({
    description: 'How long an OAuth access token of /mcp is valid; clients renew it with their refresh token.',
  }),
  OPSPAD_OAUTH_REFRESH_TTL: duration.default(30 * 24 * 3600 * 1000).meta({
    description: 'How long an OAuth refresh token stays usable unused; each use replaces it with a new one.',
  }),
  OPSPAD_OAUTH_REGISTRATION_LIMIT: perWindow.default({ max: 20, windowMs: 3600 * 1000 }).meta({
    description: 'OAuth client registrations per client address, as <count>/<duration>; 429 beyond.',
    bound: 'OAuth client registrations per address',
  }),
};

/**
 * Who may try to sign in: failed API-key or operator sign-ins per client address, and the proxies
 * trusted to name that address. Read by whatever serves the API or a metrics port.
 */
export const SIGN_IN_SETTINGS = {
  OPSPAD_AUTH_FAILURE_LIMIT: perWindow.default({ max: 20, windowMs: 60_000 }).meta({
    description:
      'Failed sign-ins (API keys, operator passwords) per client address and per credential; beyond, wrong ones get 429 and right ones still pass.',
    bound: 'failed sign-ins per client address and per credential',
  }),
  OPSPAD_TRUST_PROXY: trustProxy.optional().meta({
    description: 'Proxies whose X-Forwarded-For names the client: a hop count, or addresses and CIDRs; unset: none.',
  }),
};
