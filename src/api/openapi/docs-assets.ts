/** The files `/docs/assets/:file` serves (see docs-route.ts), and their media types. */
export const DOCS_ASSETS = {
  'redoc.standalone.js': 'text/javascript; charset=utf-8',
  'redoc.standalone.js.LICENSE.txt': 'text/plain; charset=utf-8',
  LICENSE: 'text/plain; charset=utf-8',
  'init.js': 'text/javascript; charset=utf-8',
} as const;
export type DocsAsset = keyof typeof DOCS_ASSETS;
