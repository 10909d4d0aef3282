/**
 * The page where a signed-in operator lets an OAuth client (a hosted MCP client) act in one
 * organization, or refuses. Everything a client or tenant wrote (its name, its redirect URI, the
 * organizations' names) goes through the operator view's escaping. The form posts back to
 * `/authorize` with the request's own parameters, which the authorization handler checks again.
 */
import { escapeHtml } from '../operator-view/html.ts';

export interface ConsentPage {
  clientName: string;
  clientId: string;
  redirectUri: string;
  /** The authorization request's parameters, carried through the form. */
  params: Record<string, string | undefined>;
  organizations: readonly string[];
  /** What was wrong with the last answer, if anything. */
  problem?: string;
}

const STYLE = `body{font:15px/1.5 system-ui,sans-serif;margin:40px auto;max-width:560px;color:#1f2937;padding:0 16px}
h1{font-size:20px} .muted{color:#6b7280;font-size:13px;word-break:break-all} .problem{color:#b91c1c}
input[type=text]{font:inherit;width:100%;padding:6px;box-sizing:border-box;margin:6px 0 14px}
button{font:inherit;padding:6px 14px;margin-right:8px;cursor:pointer}`;

/**
 * The Content-Security-Policy of the page: nothing loads, and its form may post to this server
 * and be redirected to the client's redirect URI (browsers apply form-action to that redirect).
 */
export function consentCsp(redirectUri: string): string {
  const target = new URL(redirectUri);
  const source = target.origin !== 'null' ? target.origin : target.protocol;
  return `default-src 'none'; style-src 'unsafe-inline'; form-action 'self' ${source}; base-uri 'none'; frame-ancestors 'none'`;
}

export function consentPage(page: ConsentPage): string {
  const hidden = Object.entries(page.params)
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('');
  const options = page.organizations.map((name) => `<option value="${escapeHtml(name)}">`).join('');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Grant access to opspad</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head><body>
<h1>Let ${escapeHtml(page.clientName)} use opspad?</h1>
<p>It will act in the organization you choose — its operations, conversations and scratchpads, through <code>/mcp</code> — until the access is revoked (<code>opspad oauth revoke</code>, or by the client).</p>
<p class="muted">Client ${escapeHtml(page.clientId)}<br>Returns to ${escapeHtml(page.redirectUri)}</p>
${page.problem ? `<p class="problem">${escapeHtml(page.problem)}</p>` : ''}
<form method="post" action="/authorize">${hidden}
<label>Organization<input type="text" name="organization" list="organizations" required autocomplete="off"></label>
<datalist id="organizations">${options}</datalist>
<button type="submit" name="decision" value="allow">Allow</button><button type="submit" name="decision" value="deny">Deny</button>
</form></body></html>`;
}
