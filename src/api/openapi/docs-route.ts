/**
 * `GET /openapi.json` (the OpenAPI document) and `GET /docs` (the same, as a readable page). The
 * page is Redoc 2's standalone bundle, copied into dist/vendor/redoc/ by the build and served
 * from here: no CDN, no external font, nothing fetched from another origin. A Content Security
 * Policy holds the page to that (scripts from this server only; Redoc's styled components need
 * inline styles, and its search runs in a worker started from a blob).
 *
 * Both are public, like the document of any public API: they describe routes, never data.
 */
import { existsSync, readFileSync } from 'node:fs';
import { Router } from 'express';
import { AppError } from '../../domain/errors.ts';
import { DOCS_ASSETS, type DocsAsset } from './docs-assets.ts';
import { openApiDocument } from './document.ts';

export const OPENAPI_PATH = '/openapi.json';
export const DOCS_PATH = '/docs';

/** dist/vendor/redoc sits two folders above this module's folder, in src/ and dist/ alike. */
const VENDOR = new URL('../../../dist/vendor/redoc/', import.meta.url);

const SYSTEM_FONTS = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
const MONO_FONTS = 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace';

/** Starts Redoc on the document; a file of its own, so the policy needs no inline script. */
const INIT_SCRIPT = `Redoc.init('openapi.json', ${JSON.stringify({
  expandResponses: '200,201',
  jsonSamplesExpandLevel: 2,
  theme: {
    typography: {
      fontFamily: SYSTEM_FONTS,
      headings: { fontFamily: SYSTEM_FONTS },
      code: { fontFamily: MONO_FONTS },
    },
  },
})}, document.getElementById('redoc'));
`;

// Relative URLs, so the page works under any path prefix a proxy adds: from <prefix>/docs,
// "docs/assets/…" is <prefix>/docs/assets/…, and "openapi.json" (fetched by init.js, resolved
// against the page) is <prefix>/openapi.json.
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>opspad API reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<div id="redoc"></div>
<script src="docs/assets/redoc.standalone.js"></script>
<script src="docs/assets/init.js"></script>
</body>
</html>
`;

export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

function asset(file: DocsAsset): string {
  if (file === 'init.js') {
    return INIT_SCRIPT;
  }
  const url = new URL(file, VENDOR);
  if (!existsSync(url)) {
    throw new AppError(
      'service_unavailable',
      'The API reference page is not built here: run `npm run build` (it copies Redoc into dist/vendor/redoc). /openapi.json works without it.',
      { path: `${DOCS_PATH}/assets/${file}` },
    );
  }
  return readFileSync(url, 'utf8');
}

export function docsRouter(): Router {
  const router = Router();
  let document: string | undefined;
  const cache = new Map<DocsAsset, string>();

  router.get(OPENAPI_PATH, (_req, res) => {
    document ??= JSON.stringify(openApiDocument());
    // A public description: tools on other origins (editors, generators) may fetch it.
    res.set('access-control-allow-origin', '*').type('application/json').send(document);
  });

  router.get(DOCS_PATH, (req, res) => {
    // Express answers /docs/ here too, where the page's relative asset URLs would resolve to
    // /docs/docs/assets/…: send the browser to /docs (relative, so a proxy's prefix stays).
    if (req.path.endsWith('/')) {
      res.redirect(301, '../docs');
      return;
    }
    res.set('content-security-policy', DOCS_CSP).set('x-content-type-options', 'nosniff').type('html').send(PAGE);
  });

  router.get(`${DOCS_PATH}/assets/:file`, (req, res) => {
    const file = req.params.file;
    if (!Object.hasOwn(DOCS_ASSETS, file)) {
      throw new AppError('not_found', `No asset ${file}. Assets: ${Object.keys(DOCS_ASSETS).join(', ')}.`, {
        field: 'file',
      });
    }
    const name = file as DocsAsset;
    const body = cache.get(name) ?? asset(name);
    cache.set(name, body);
    res
      .set('content-type', DOCS_ASSETS[name])
      .set('x-content-type-options', 'nosniff')
      .set('cache-control', 'public, max-age=3600')
      .send(body);
  });

  return router;
}
