/**
 * The live progress app of an operation (MCP Apps, `@modelcontextprotocol/ext-apps`): the host
 * (a chat client) renders the resource `ui://opspad/operation.html` beside every result of the
 * operation tool, which names it in its `_meta.ui.resourceUri`. The view reads the operation id
 * from the result (create, progress, get, …), then calls the tool's `get` through the host every
 * few seconds while the operation runs — counts, pace, failures with their reasons — and its
 * pause, resume and cancel buttons call the tool's actions through the host, so they go through
 * the same session, key and organization as the model's calls.
 *
 * The page is static: nothing a tenant wrote is ever part of its HTML. Everything the operation
 * holds arrives as JSON and is written with `textContent`, never parsed as HTML (the operator
 * view escapes the same text server-side, src/api/operator-view/html.ts). It loads nothing from
 * anywhere: the App class (ext-apps' self-contained bundle) and the view's own code are one inline
 * module, its style one inline sheet, and its Content-Security-Policy allows exactly those two
 * (by hash) and nothing else — no connection, font, image or frame.
 *
 * ext-apps 1.x is the line built on the MCP SDK 1.x opspad uses (2.x needs the SDK's 2.x
 * packages); the wire protocol is the same in both.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

export const OPERATION_APP_URI = 'ui://opspad/operation.html';
/** The MIME type of an MCP App's HTML (ext-apps' RESOURCE_MIME_TYPE). */
export const OPERATION_APP_MIME_TYPE = 'text/html;profile=mcp-app';
/** The tool `_meta` that links the app (with the older flat key hosts still read). */
export const OPERATION_APP_TOOL_META = { ui: { resourceUri: OPERATION_APP_URI }, 'ui/resourceUri': OPERATION_APP_URI };
/** The resource's `_meta`: no outside domain at all, and a border around the view. */
export const OPERATION_APP_RESOURCE_META = {
  ui: { csp: { connectDomains: [], resourceDomains: [] }, prefersBorder: true },
};

const STYLE = `:root{color-scheme:light dark;font:14px/1.45 system-ui,sans-serif}
body{margin:0;padding:12px 14px;color:CanvasText;background:Canvas}
h1{font-size:15px;margin:0 0 6px;display:flex;gap:8px;align-items:baseline;flex-wrap:wrap}
.id{font:12px ui-monospace,monospace;opacity:.7;word-break:break-all}
.status{font-weight:600}
.bar{height:10px;border-radius:5px;background:color-mix(in srgb,CanvasText 12%,Canvas);display:flex;overflow:hidden;margin:8px 0}
.bar span{display:block;height:100%}.ok{background:#10b981}.ko{background:#ef4444}
dl{display:grid;grid-template-columns:repeat(auto-fit,minmax(90px,1fr));gap:4px 12px;margin:8px 0}
dt{font-size:11px;text-transform:uppercase;opacity:.65}dd{margin:0;font-size:16px;font-variant-numeric:tabular-nums}
ul{margin:4px 0 8px;padding-left:18px;font-size:12px}li{word-break:break-word}
button{font:inherit;font-size:13px;padding:3px 12px;margin-right:6px;cursor:pointer}
.problem{color:#dc2626;font-size:12px}`;

const VIEW = `
const { App } = __extApps;
const $ = (id) => document.getElementById(id);
const TOOL = 'manage_assistant_operation';
const FINISHED = new Set(['completed', 'cancelled']);
const app = new App({ name: 'opspad operation', version: '1' });
let operationId = null;
let timer;
let last = null;

const show = (id, value) => { $(id).textContent = value === null || value === undefined ? '—' : String(value); };
const number = (value) => (typeof value === 'number' ? value.toLocaleString('en-US') : '—');
function bodyOf(result) {
  if (!result) return null;
  if (result.structuredContent && typeof result.structuredContent === 'object') return result.structuredContent;
  const first = Array.isArray(result.content) ? result.content.find((c) => c.type === 'text') : undefined;
  try { return first ? JSON.parse(first.text) : null; } catch { return null; }
}
function render(op) {
  show('type', op.operation_type);
  show('status', op.status);
  show('operation', op.operation_id);
  show('completed', number(op.completed_count));
  show('failed', number(op.failed_count));
  show('remaining', number(op.remaining_count));
  show('total', number(op.total_items));
  const total = op.total_items || 1;
  $('done-bar').style.width = (100 * (op.completed_count || 0)) / total + '%';
  $('failed-bar').style.width = (100 * (op.failed_count || 0)) / total + '%';
  const done = (op.completed_count || 0) + (op.failed_count || 0);
  const now = Date.now();
  if (last && now > last.at && done >= last.done) {
    show('pace', Math.round(((done - last.done) * 60000) / (now - last.at)).toLocaleString('en-US') + ' items/min');
  }
  last = { at: now, done };
  const list = $('failures');
  list.replaceChildren();
  for (const failure of (op.failures || []).slice(0, 5)) {
    const item = document.createElement('li');
    item.textContent = failure.id + ': ' + (failure.reason ?? '');
    list.append(item);
  }
  $('failures-heading').hidden = list.childElementCount === 0;
  $('pause').disabled = op.status !== 'active';
  $('resume').disabled = op.status !== 'paused';
  $('cancel').disabled = FINISHED.has(op.status);
}
async function call(args) {
  const result = await app.callServerTool({ name: TOOL, arguments: { ...args, operation_id: operationId } });
  const body = bodyOf(result);
  show('problem', result.isError ? (body && body.error && body.error.message) || 'The call failed.' : '');
  return result.isError ? null : body;
}
async function refresh() {
  clearTimeout(timer);
  if (!operationId) return;
  const op = await call({ action: 'get', failures_limit: 5 }).catch((error) => { show('problem', String(error)); return null; });
  if (op) render(op);
  if (!op || !FINISHED.has(op.status)) timer = setTimeout(refresh, 3000);
}
for (const action of ['pause', 'resume', 'cancel']) {
  $(action).addEventListener('click', async () => {
    $(action).disabled = true;
    await call({ action }).catch((error) => show('problem', String(error)));
    await refresh();
  });
}
app.ontoolresult = (params) => {
  const body = bodyOf(params);
  if (body && typeof body.operation_id === 'string' && body.operation_id !== operationId) {
    operationId = body.operation_id;
    last = null;
    refresh();
  }
};
await app.connect();
`;

const BODY = `<h1><span id="type">—</span><span class="status" id="status"></span><span class="id" id="operation"></span></h1>
<div class="bar" aria-hidden="true"><span class="ok" id="done-bar"></span><span class="ko" id="failed-bar"></span></div>
<dl><div><dt>Done</dt><dd id="completed">—</dd></div><div><dt>Failed</dt><dd id="failed">—</dd></div>
<div><dt>Remaining</dt><dd id="remaining">—</dd></div><div><dt>Total</dt><dd id="total">—</dd></div>
<div><dt>Pace</dt><dd id="pace">—</dd></div></dl>
<div id="failures-heading" hidden>Failures</div><ul id="failures"></ul>
<button id="pause" disabled>Pause</button><button id="resume" disabled>Resume</button><button id="cancel" disabled>Cancel</button>
<p class="problem" id="problem"></p>`;

/**
 * The bundle's closing `export{local as Name,…}` made a binding of the inline module, which
 * cannot be imported from: `const __extApps={Name:local,…}`.
 */
export function bundleAsBinding(bundle: string): string {
  const match = /export\s*\{([^}]*)\}\s*;?\s*$/.exec(bundle);
  if (!match?.[1]) {
    throw new Error('the ext-apps bundle does not end with an export list');
  }
  const entries = match[1].split(',').map((part) => {
    const [local, exported] = part.trim().split(/\s+as\s+/);
    return `${exported ?? local}:${local}`;
  });
  return `${bundle.slice(0, match.index)}const __extApps={${entries.join(',')}};`;
}

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

let html: string | undefined;

/** The app's HTML (built once per process: the bundle is read from ext-apps' package). */
export function operationAppHtml(): string {
  if (html === undefined) {
    const require = createRequire(import.meta.url);
    const bundle = readFileSync(require.resolve('@modelcontextprotocol/ext-apps/app-with-deps'), 'utf8');
    const script = `${bundleAsBinding(bundle)}\n${VIEW}`;
    if (/<\/script|<!--/i.test(script)) {
      throw new Error('the ext-apps bundle holds text that would end an inline script');
    }
    const csp = `default-src 'none'; script-src ${sha256(script)}; style-src ${sha256(STYLE)}; img-src data:; base-uri 'none'; form-action 'none'`;
    html = `<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>opspad operation</title>
<style>${STYLE}</style></head><body>
${BODY}
<script type="module">${script}</script></body></html>`;
  }
  return html;
}
