/**
 * The OAuth flow of `/mcp` end to end, with the MCP SDK's own OAuth client: discovery from the
 * 401 (protected-resource metadata, authorization-server metadata), dynamic client registration,
 * the operator's consent on opspad's page (signed in with the operator password, choosing the
 * organization), PKCE, the token, calls that act in the granted organization, a refresh, and a
 * revocation after which the token is refused with 401.
 *
 * Also: a token is for /mcp only (refused on /v1); a grant posted from another site's page is
 * refused; an operator's refusal reaches the client as access_denied; a spent code is refused.
 */
import { randomUUID } from 'node:crypto';
import { type OAuthClientProvider, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/store/index.ts';
import { type Harness, ids, startHarness } from '../helpers/harness.ts';

const REDIRECT = 'http://127.0.0.1:9/callback';

/** A client application's memory: what the SDK asks it to keep, and where it would send the user. */
class TestOAuthClient implements OAuthClientProvider {
  information?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier = '';
  authorizationUrl?: URL;
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Test <assistant>',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    };
  }
  state() {
    return 'state-123';
  }
  clientInformation() {
    return this.information;
  }
  saveClientInformation(information: OAuthClientInformationMixed) {
    this.information = information;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** The hidden fields of the consent page's form. */
function formFields(html: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const match of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    fields[match[1] as string] = (match[2] as string).replace(/&#(\d+);/g, (_, code) =>
      String.fromCharCode(Number(code)),
    );
  }
  return fields;
}

describe('OAuth for /mcp with the SDK’s OAuth client', () => {
  let harness: Harness;
  let organization: { name: string; id: string };

  beforeAll(async () => {
    harness = await startHarness('postgres');
    const name = `org-${randomUUID()}`;
    organization = { name, id: (await createApiKey(harness.db, name)).organization_id };
  });

  afterAll(async () => {
    await harness?.close();
  });

  /** The operator answers the consent page at `url` (signed in), from the page itself or from `origin`. */
  const consent = async (url: URL, answer: Record<string, string>, origin = harness.url) => {
    const page = await fetch(url, { headers: { authorization: harness.adminAuthorization } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('Test &#60;assistant&#62;'); // the client's name, escaped
    expect(page.headers.get('content-security-policy')).toContain("form-action 'self' http://127.0.0.1:9");
    return fetch(`${harness.url}/authorize`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        authorization: harness.adminAuthorization,
        'content-type': 'application/x-www-form-urlencoded',
        origin,
      },
      body: new URLSearchParams({ ...formFields(html), ...answer }).toString(),
    });
  };

  /** Runs the flow up to the consent; returns the provider and the authorization URL. */
  const startFlow = async () => {
    const provider = new TestOAuthClient();
    const transport = new StreamableHTTPClientTransport(new URL(`${harness.url}/mcp`), { authProvider: provider });
    const client = new Client({ name: 'oauth-test', version: '0' });
    await expect(client.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
    expect(provider.information?.client_id).toBeTruthy();
    expect(provider.authorizationUrl).toBeDefined();
    return { provider, transport, url: provider.authorizationUrl as URL };
  };

  it('registers, is granted an organization by the operator, calls /mcp in it, refreshes, and is revoked', async () => {
    const { provider, transport, url } = await startFlow();
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('resource')).toBe(`${harness.url}/mcp`);

    const granted = await consent(url, { organization: organization.name, decision: 'allow' });
    expect(granted.status).toBe(302);
    const back = new URL(String(granted.headers.get('location')));
    expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
    expect(back.searchParams.get('state')).toBe('state-123');
    const code = String(back.searchParams.get('code'));
    await transport.finishAuth(code);
    const tokens = provider.saved as OAuthTokens;
    expect(tokens.access_token).toMatch(/^opa_/);
    expect(tokens.refresh_token).toMatch(/^opr_/);

    // Only hashes are stored.
    const stored = await harness.db.query<{ token_hash: string }>('SELECT token_hash FROM oauth_token');
    expect(stored.map((row) => row.token_hash)).not.toContain(tokens.access_token);

    const client = new Client({ name: 'oauth-test', version: '0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${harness.url}/mcp`), { authProvider: provider }));
    const created = (await client.callTool({
      name: 'manage_assistant_operation',
      arguments: {
        action: 'create',
        operation_type: 'send_followup',
        total_items: 3,
        item_ids: ids(3),
        execution: 'assistant',
      },
    })) as CallToolResult;
    expect(created.isError).toBeFalsy();
    const operationId = JSON.parse((created.content[0] as { text: string }).text).operation_id as string;
    const [row] = await harness.db.query<{ organization_id: string }>(
      'SELECT organization_id FROM assistant_operation WHERE id = $1',
      [operationId],
    );
    expect(row?.organization_id).toBe(organization.id);
    const [event] = await harness.db.query<{ actor: string }>(
      "SELECT actor FROM operation_event WHERE operation_id = $1 AND kind = 'created'",
      [operationId],
    );
    expect(event?.actor).toMatch(/^oauth_grant:/);
    await client.close();

    // The code is spent.
    const again = await fetch(`${harness.url}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        code_verifier: provider.verifier,
        client_id: String(provider.information?.client_id),
        redirect_uri: REDIRECT,
      }).toString(),
    });
    expect(again.status).toBe(400);
    expect(((await again.json()) as { error: string }).error).toBe('invalid_grant');

    // The access token is for /mcp only.
    const onV1 = await fetch(`${harness.url}/v1/tools`, {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    });
    expect(onV1.status).toBe(401);

    // A refresh replaces both tokens; the old refresh token is spent.
    const refresh = (token: string) =>
      fetch(`${harness.url}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'refresh_token',
          refresh_token: token,
          client_id: String(provider.information?.client_id),
        }).toString(),
      });
    const refreshed = await refresh(String(tokens.refresh_token));
    expect(refreshed.status).toBe(200);
    const fresh = (await refreshed.json()) as OAuthTokens;
    expect(fresh.access_token).not.toBe(tokens.access_token);
    expect((await refresh(String(tokens.refresh_token))).status).toBe(400);

    // Revocation (RFC 7009) ends the grant: every token of it is refused at once.
    const revoked = await fetch(`${harness.url}/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        token: String(fresh.refresh_token),
        client_id: String(provider.information?.client_id),
      }).toString(),
    });
    expect(revoked.status).toBe(200);
    for (const token of [tokens.access_token, fresh.access_token]) {
      const refused = await fetch(`${harness.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toContain('error="invalid_token"');
    }
    expect((await refresh(String(fresh.refresh_token))).status).toBe(400);
  });

  it('refuses a grant posted from another site, and passes an operator’s refusal back to the client', async () => {
    const { url } = await startFlow();
    const grants = async () =>
      (await harness.db.query('SELECT 1 FROM oauth_grant WHERE organization_id = $1', [organization.id])).length;
    const before = await grants();
    const forged = await consent(
      url,
      { organization: organization.name, decision: 'allow' },
      'http://evil.example.com',
    );
    expect(forged.status).toBe(403);
    expect(await grants()).toBe(before);

    const unknown = await consent(url, { organization: 'no-such-organization', decision: 'allow' });
    expect(unknown.status).toBe(400);

    const denied = await consent(url, { organization: organization.name, decision: 'deny' });
    expect(denied.status).toBe(302);
    const back = new URL(String(denied.headers.get('location')));
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('code')).toBeNull();
  });

  it('asks for the operator’s sign-in before showing the consent page', async () => {
    const { url } = await startFlow();
    const anonymous = await fetch(url);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Basic /);
  });
});
