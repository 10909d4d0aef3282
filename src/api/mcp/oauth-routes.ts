/**
 * The OAuth routes of `/mcp` (when OPSPAD_OAUTH is on): the MCP SDK's `mcpAuthRouter` over
 * opspad's provider (oauth-provider.ts), at the API's root as the SDK requires —
 * `/.well-known/oauth-authorization-server`, `/register`, `/authorize`, `/token`, `/revoke`.
 *
 * `/authorize` is an operator page: behind the operator sign-in and its headers, and a grant
 * (a POST) must come from the page itself (operator-guard.ts), so another site cannot make a
 * signed-in operator's browser grant its client. Registrations, which make opspad store a row,
 * are bounded per address across every API process (OPSPAD_OAUTH_REGISTRATION_LIMIT); the SDK's
 * own per-process limits are off (see below).
 *
 * The issuer is the public address: without OPSPAD_PUBLIC_URL it is known once a request shows
 * the port, so the router is built at the first request for each address.
 */
import { mcpAuthRouter } from '@modelcontextprotocol/sdk/server/auth/router.js';
import type { RequestHandler, Router } from 'express';
import express from 'express';
import type { Database } from '../../store/index.ts';
import { guardOperatorChanges, OPERATOR_CSP, operatorHeaders } from '../operator-guard.ts';
import { opspadOAuthProvider } from './oauth-provider.ts';
import type { PublicAddress } from './public-address.ts';

export interface OAuthRouteDeps {
  db: Database;
  address: PublicAddress;
  /** The operator sign-in (basic auth) that guards the consent page. */
  operatorAuth: RequestHandler;
  operator: string;
  readOnly: boolean;
  tokenTtlMs: number;
  refreshTtlMs: number;
  /** Bounds registrations per address (rate-limit.ts rateLimitPerAddress). */
  registrationLimit?: RequestHandler;
}

/** Whether an issuer at `origin` may be served: https, or a loopback address (as the SDK requires). */
export function oauthServable(origin: string): boolean {
  const url = new URL(origin);
  return url.protocol === 'https:' || url.hostname === 'localhost' || url.hostname === '127.0.0.1';
}

/** The issuer identifier of the authorization server at `origin`. */
export const issuerOf = (origin: string) => new URL('/', origin).href;

export function oauthRouter(deps: OAuthRouteDeps): Router {
  const router = express.Router();
  const provider = opspadOAuthProvider({
    db: deps.db,
    lifetimes: { accessMs: deps.tokenTtlMs, refreshMs: deps.refreshTtlMs },
    resourceOf: (req) => deps.address.mcpUrl(req),
    operator: deps.operator,
  });
  const byOrigin = new Map<string, RequestHandler>();
  router.use(
    '/authorize',
    operatorHeaders(OPERATOR_CSP.page),
    deps.operatorAuth,
    guardOperatorChanges({ readOnly: deps.readOnly }),
  );
  if (deps.registrationLimit) {
    router.post('/register', deps.registrationLimit);
  }
  router.use((req, res, next) => {
    const origin = deps.address.origin(req);
    let routes = byOrigin.get(origin);
    if (!routes) {
      routes = mcpAuthRouter({
        provider,
        issuerUrl: new URL(issuerOf(origin)),
        resourceServerUrl: new URL(deps.address.mcpUrl(req)),
        resourceName: 'opspad',
        // Per-process limits by address would also throttle every user of a hosted client behind
        // one address; registrations are bounded across processes above, and a token or code is
        // 256 random bits (guessing one is hopeless, and each try is one index probe).
        authorizationOptions: { rateLimit: false },
        tokenOptions: { rateLimit: false },
        revocationOptions: { rateLimit: false },
        clientRegistrationOptions: { rateLimit: false, clientSecretExpirySeconds: 0 },
      });
      byOrigin.set(origin, routes);
    }
    routes(req, res, next);
  });
  return router;
}
