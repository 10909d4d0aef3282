/**
 * What hosted MCP clients hold: the sessions of `/mcp` (mcp-session-repo.ts) and the OAuth
 * clients, grants, codes and tokens of the authorization flow (oauth-repo.ts).
 *
 * Tables: mcp_session, oauth_client, oauth_grant, oauth_code, oauth_token.
 *
 * Lock order: each statement writes its own rows; a token exchange deletes the code (or the
 * refresh token) it spends before it inserts the new tokens, in one transaction.
 */
export * from './mcp-session-repo.ts';
export * from './oauth-repo.ts';
