/**
 * What every operator surface (Bull Board, the operations page, /metrics) shares:
 *
 * - Headers on every response, the 401 included: `X-Frame-Options: DENY` and a Content Security
 *   Policy with `frame-ancestors 'none'` (no page of another site can frame them and trick a
 *   signed-in operator into clicking), `nosniff`, and a same-origin referrer policy.
 * - One check for every request that changes something (any method but GET, HEAD and OPTIONS): it
 *   must come from a page of this server. A browser attaches the operator's basic-auth
 *   credentials to a cross-site form or fetch too, so without this a page elsewhere could pause
 *   operations or empty queues. The browser's `Sec-Fetch-Site`, when sent, must say same-origin,
 *   and the `Origin` (or, failing it, the `Referer`) must name this host.
 * - Read-only mode (OPSPAD_ADMIN_READONLY): every such request is refused, whatever its origin.
 * Refusals are 403 forbidden, and change nothing.
 */
import type { Request, RequestHandler } from 'express';
import { AppError } from '../domain/errors.ts';

/** Policies per surface: each allows what its pages load, and nothing may frame them. */
export const OPERATOR_CSP = {
  /**
   * The server-rendered operations pages: inline styles, forms posting to themselves, and their
   * one script (served by this app) following their live-update stream.
   */
  page: "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  /**
   * Bull Board's single-page app: its own scripts, styles and fonts, nothing from elsewhere (its
   * page's link to a web font service is taken out: board.ts).
   */
  board:
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; font-src 'self' data:; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
  /** Plain text and JSON. */
  data: "default-src 'none'; frame-ancestors 'none'",
} as const;

export function operatorHeaders(csp: string): RequestHandler {
  return (_req, res, next) => {
    res.set({
      'X-Frame-Options': 'DENY',
      'Content-Security-Policy': csp,
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'same-origin',
    });
    next();
  };
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The request comes from this server's own pages (not a cross-site form or fetch). */
export function isSameOrigin(req: Request): boolean {
  const site = req.get('sec-fetch-site');
  if (site !== undefined && site !== 'same-origin') {
    return false;
  }
  const origin = req.get('origin') ?? req.get('referer');
  if (!origin) {
    return false;
  }
  try {
    return new URL(origin).host === req.get('host');
  } catch {
    return false; // "null" (a sandboxed frame, a file) or garbage
  }
}

/** Refuses (403) a change in read-only mode, or one that does not come from this server's pages. */
export function assertOperatorMayChange(req: Request, { readOnly }: { readOnly: boolean }): void {
  if (readOnly) {
    throw new AppError(
      'forbidden',
      'The operator pages are read-only (OPSPAD_ADMIN_READONLY=true): nothing can be changed from them.',
      { read_only: true },
    );
  }
  if (!isSameOrigin(req)) {
    throw new AppError(
      'forbidden',
      "Operator changes must come from the operator pages themselves (the request's Origin is not this server).",
      { origin: req.get('origin')?.slice(0, 200) ?? null },
    );
  }
}

/** Lets reads through, and every other method only past {@link assertOperatorMayChange}. */
export function guardOperatorChanges(options: { readOnly: boolean }): RequestHandler {
  return (req, _res, next) => {
    if (!SAFE_METHODS.has(req.method)) {
      assertOperatorMayChange(req, options);
    }
    next();
  };
}
