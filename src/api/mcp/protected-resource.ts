/**
 * The OAuth 2.0 protected-resource metadata of `/mcp` (RFC 9728), at the well-known path the MCP
 * authorization specification derives from the resource's URL. A client that is answered 401
 * finds it through the `resource_metadata` of the `WWW-Authenticate` header, and from it the
 * authorization server (this same API, when OAuth is served) or learns that only a Bearer API
 * key will do.
 */
export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource/mcp';

export function protectedResourceMetadata(resource: string, authorizationServers: readonly string[]) {
  return {
    resource,
    ...(authorizationServers.length > 0 ? { authorization_servers: authorizationServers } : {}),
    bearer_methods_supported: ['header'],
    resource_name: 'opspad',
  };
}
