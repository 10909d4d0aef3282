/**
 * opspad as its own OAuth authorization server for `/mcp`, behind the MCP SDK's handlers
 * (`mcpAuthRouter`: metadata, dynamic client registration, authorization with PKCE S256, token,
 * revocation). This file is what the SDK leaves to a server: where clients, codes and tokens live
 * (Postgres, hashed: store/mcp-access/oauth-repo.ts) and who consents — the operator, signed in
 * with the operator password, picks the organization the client may act in.
 *
 * Every registered client is public (`token_endpoint_auth_method: none`): registration is open
 * to anyone, so a client secret would prove nothing that PKCE does not, and the SDK compares
 * secrets as stored (it would have to keep them usable). Tokens are for `/mcp` only: an access
 * token is refused on `/v1`, and a request naming another resource (RFC 8707) is refused.
 */
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import {
  AccessDeniedError,
  InvalidClientMetadataError,
  InvalidGrantError,
  InvalidTargetError,
  InvalidTokenError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { AuthorizationParams, OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type {
  OAuthClientInformationFull,
  OAuthTokenRevocationRequest,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import type { Request, Response } from 'express';
import {
  authenticateOAuthToken,
  codeChallengeOf,
  type Database,
  exchangeOAuthCode,
  getOAuthClient,
  grantOAuthClient,
  type IssuedTokens,
  organizationByName,
  organizationsByName,
  refreshOAuthTokens,
  registerOAuthClient,
  revokeOAuthToken,
  type TokenLifetimes,
} from '../../store/index.ts';
import { consentCsp, consentPage } from './consent-page.ts';

/** Bounds on what a registering client may make opspad store. */
const MAX_REDIRECT_URIS = 10;
const MAX_METADATA_BYTES = 16 * 1024;
/** Organizations the consent page suggests (any other is typed by name). */
const SUGGESTED_ORGANIZATIONS = 200;

export interface OAuthProviderDeps {
  db: Database;
  lifetimes: TokenLifetimes;
  /** The URL of `/mcp` as this request's client knows it: the only resource tokens are for. */
  resourceOf(req: Request): string;
  /** Who grants, for the audit trail (the operator user). */
  operator: string;
}

function tokensOf(issued: IssuedTokens): OAuthTokens {
  return {
    access_token: issued.accessToken,
    token_type: 'Bearer',
    expires_in: issued.expiresIn,
    refresh_token: issued.refreshToken,
  };
}

function clientsStore(db: Database): OAuthRegisteredClientsStore {
  return {
    async getClient(clientId) {
      return ((await getOAuthClient(db, clientId)) ?? undefined) as OAuthClientInformationFull | undefined;
    },
    async registerClient(client) {
      const { client_secret: _secret, client_secret_expires_at: _expires, ...rest } = client;
      const registered = { ...rest, token_endpoint_auth_method: 'none' } as OAuthClientInformationFull;
      if (registered.redirect_uris.length === 0 || registered.redirect_uris.length > MAX_REDIRECT_URIS) {
        throw new InvalidClientMetadataError(`redirect_uris must list 1 to ${MAX_REDIRECT_URIS} URIs.`);
      }
      if (Buffer.byteLength(JSON.stringify(registered)) > MAX_METADATA_BYTES) {
        throw new InvalidClientMetadataError(`The client metadata must take at most ${MAX_METADATA_BYTES} bytes.`);
      }
      await registerOAuthClient(db, registered.client_id, registered);
      return registered;
    },
  };
}

export function opspadOAuthProvider(deps: OAuthProviderDeps): OAuthServerProvider {
  const { db } = deps;
  const store = clientsStore(db);

  const render = async (
    res: Response,
    client: OAuthClientInformationFull,
    params: AuthorizationParams,
    problem?: string,
  ) => {
    const req = res.req as Request;
    const form = (req.method === 'POST' ? req.body : req.query) as Record<string, unknown>;
    const carried = [
      'client_id',
      'redirect_uri',
      'response_type',
      'code_challenge',
      'code_challenge_method',
      'scope',
      'state',
      'resource',
    ];
    const organizations = await organizationsByName(db, SUGGESTED_ORGANIZATIONS);
    res.set('Content-Security-Policy', consentCsp(params.redirectUri));
    res
      .status(problem ? 400 : 200)
      .type('html')
      .send(
        consentPage({
          clientName: client.client_name ?? 'An MCP client',
          clientId: client.client_id,
          redirectUri: params.redirectUri,
          params: Object.fromEntries(
            carried.map((name) => [name, typeof form[name] === 'string' ? (form[name] as string) : undefined]),
          ),
          organizations: organizations.map((organization) => organization.name),
          problem,
        }),
      );
  };

  return {
    get clientsStore() {
      return store;
    },

    async authorize(client, params, res) {
      const req = res.req as Request;
      const resource = deps.resourceOf(req);
      if (params.resource && params.resource.href !== new URL(resource).href) {
        throw new InvalidTargetError(`This server grants access to ${resource} only.`);
      }
      const body = (req.method === 'POST' ? req.body : {}) as Record<string, unknown>;
      if (body.decision === undefined) {
        await render(res, client, params);
        return;
      }
      if (body.decision !== 'allow') {
        throw new AccessDeniedError('The operator refused the access.');
      }
      const name = typeof body.organization === 'string' ? body.organization.trim() : '';
      const organization = name ? await organizationByName(db, name) : null;
      if (!organization) {
        await render(
          res,
          client,
          params,
          `There is no organization named "${name.slice(0, 200)}". Choose one of the list.`,
        );
        return;
      }
      const { code } = await grantOAuthClient(db, {
        clientId: client.client_id,
        organizationId: organization.id,
        resource,
        grantedBy: `operator:${deps.operator}`,
        codeChallenge: params.codeChallenge,
        redirectUri: params.redirectUri,
      });
      const target = new URL(params.redirectUri);
      target.searchParams.set('code', code);
      if (params.state !== undefined) {
        target.searchParams.set('state', params.state);
      }
      res.redirect(302, target.href);
    },

    async challengeForAuthorizationCode(client, code) {
      const challenge = await codeChallengeOf(db, client.client_id, code);
      if (!challenge) {
        throw new InvalidGrantError('The authorization code is not valid, was used already, or expired.');
      }
      return challenge;
    },

    async exchangeAuthorizationCode(client, code, _verifier, redirectUri, resource) {
      const exchange = await exchangeOAuthCode(
        db,
        { clientId: client.client_id, code, redirectUri, resource: resource?.href },
        deps.lifetimes,
      );
      if (!exchange.ok) {
        throw new InvalidGrantError(
          {
            unknown_code: 'The authorization code is not valid, was used already, or expired.',
            redirect_uri_mismatch: 'redirect_uri is not the one the code was issued for.',
            resource_mismatch: 'resource is not the one the code was issued for.',
          }[exchange.reason],
        );
      }
      return tokensOf(exchange.tokens);
    },

    async exchangeRefreshToken(client, refreshToken) {
      const issued = await refreshOAuthTokens(db, client.client_id, refreshToken, deps.lifetimes);
      if (!issued) {
        throw new InvalidGrantError('The refresh token is not valid, was used already, expired or was revoked.');
      }
      return tokensOf(issued);
    },

    async verifyAccessToken(token): Promise<AuthInfo> {
      const principal = await authenticateOAuthToken(db, token);
      if (!principal) {
        throw new InvalidTokenError('The access token is not valid, expired or was revoked.');
      }
      return { token, clientId: '', scopes: [], extra: { organizationId: principal.organizationId } };
    },

    async revokeToken(client: OAuthClientInformationFull, request: OAuthTokenRevocationRequest) {
      await revokeOAuthToken(db, request.token, client.client_id);
    },
  };
}
