/**
 * `GET /`: where things are. A browser gets a page of links (the API reference, the operator
 * view, Bull Board, health); an API client a small JSON index of the same paths. Public, like
 * /docs: it names paths, never data.
 */
import { Router } from 'express';
import type { ServiceIndex } from '../../domain/conversation-output.ts';
import { BOARD_PATH } from '../board.ts';
import { DOCS_PATH, OPENAPI_PATH } from '../openapi/docs-route.ts';
import { OPERATIONS_PAGE_PATH } from '../operator-view/html.ts';

export const SERVICE_INDEX: ServiceIndex = {
  service: 'opspad',
  links: {
    api: '/v1',
    docs: DOCS_PATH,
    openapi: OPENAPI_PATH,
    health: '/healthz',
    readiness: '/readyz',
    operator_view: OPERATIONS_PAGE_PATH,
    bull_board: BOARD_PATH,
    metrics: '/metrics',
  },
};

/** Links relative to the page (no leading slash), so they hold under a path prefix a proxy adds (`<prefix>/`). */
const here = (path: string) => path.replace(/^\//, '');
const { links } = SERVICE_INDEX;

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>opspad</title>
<link rel="icon" href="data:,">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#1f2937}code{font-size:.9em}li{margin:.4rem 0}</style>
</head>
<body>
<h1>opspad</h1>
<p>Durable working memory for AI assistants doing bulk work. Assistants and workers use the HTTP API under <code>${links.api}</code>, with an organization's API key (<code>opspad keys create --org &lt;name&gt;</code>).</p>
<ul>
<li><a href="${here(links.docs)}">API reference</a> · <a href="${here(links.openapi)}">OpenAPI document</a></li>
<li><a href="${here(links.operator_view)}">Operator view</a>: every organization's operations (operator sign-in)</li>
<li><a href="${here(links.bull_board)}">Bull Board</a>: the job queues (operator sign-in)</li>
<li><a href="${here(links.health)}">Liveness</a> · <a href="${here(links.readiness)}">readiness</a> · <a href="${here(links.metrics)}">metrics</a> (operator sign-in)</li>
</ul>
</body>
</html>
`;

const PAGE_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export function homeRouter(): Router {
  const router = Router();
  router.get('/', (req, res) => {
    res.vary('Accept');
    // A browser asks for HTML first; curl and API clients take JSON (`*/*` prefers the first).
    if (req.accepts(['json', 'html']) === 'html') {
      res.set('content-security-policy', PAGE_CSP).set('x-content-type-options', 'nosniff').type('html').send(PAGE);
      return;
    }
    res.json(SERVICE_INDEX);
  });
  return router;
}
