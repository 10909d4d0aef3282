/**
 * The operator view's HTML building blocks. Everything that reaches HTML from the database goes
 * through {@link escapeHtml} (or {@link text}, which also clips it): operation types, item ids,
 * reasons, notes and organization names are written by tenants.
 */

export const OPERATIONS_PAGE_PATH = '/admin/operations';
export const SCRIPT_PATH = `${OPERATIONS_PAGE_PATH}/assets/operator-view.js`;

/** Escapes text for HTML element content and quoted attribute values. */
export function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Escaped, and clipped to `max` characters (the whole text in the title, for a hover). */
export function text(value: string | null | undefined, max = 200): string {
  const whole = value ?? '';
  if (whole.length <= max) {
    return escapeHtml(whole);
  }
  return `<span title="${escapeHtml(whole.slice(0, 2000))}">${escapeHtml(whole.slice(0, max))}…</span>`;
}

/** A point in time: UTC text the page's script turns into "12s ago" (the exact time on hover). */
export function time(at: Date | string | null | undefined): string {
  if (!at) {
    return '—';
  }
  const iso = new Date(at).toISOString();
  return `<time datetime="${iso}" data-ago title="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`;
}

export function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** A query string from the parameters that have a value. */
export function query(params: Record<string, string | number | undefined | null>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') {
      search.set(key, String(value));
    }
  }
  const s = search.toString();
  return s ? `?${s}` : '';
}

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:20px 24px;color:#1f2937;background:#f9fafb}
h1{font-size:20px;margin:0 0 12px} h2{font-size:16px;margin:24px 0 8px} a{color:#2563eb}
nav{display:flex;gap:16px;align-items:center;margin-bottom:12px} nav .live{margin-left:auto;font-size:12px;color:#6b7280}
nav .live.on{color:#059669}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{padding:7px 8px;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:top}
th{font-size:12px;text-transform:uppercase;color:#6b7280;white-space:nowrap}
.bar{width:180px;height:12px;background:#e5e7eb;border-radius:6px;overflow:hidden;display:flex}
.bar .ok{background:#10b981}.bar .ko{background:#ef4444}.bar .ab{background:#9ca3af}
.status{font-weight:600}.active{color:#059669}.paused{color:#d97706}.completed{color:#2563eb}.cancelled{color:#6b7280}
form{display:inline} button,.button{margin:0 4px 4px 0;cursor:pointer;font:inherit;font-size:13px;padding:2px 8px;border:1px solid #9ca3af;border-radius:4px;background:#fff;color:#1f2937;text-decoration:none;display:inline-block}
.danger{border-color:#dc2626;color:#b91c1c}
.muted{color:#6b7280;font-size:12px} .id{font-family:ui-monospace,monospace;font-size:12px;color:#6b7280;word-break:break-all}
.reason{color:#b91c1c;font-size:12px;word-break:break-word}
.filters{display:flex;gap:8px;flex-wrap:wrap;margin-bottom:12px} .filters input[name=q]{width:380px}
.pager{display:flex;gap:16px;align-items:center;margin:10px 0}
.notice{background:#eff6ff;border:1px solid #bfdbfe;padding:6px 10px;margin:8px 0;border-radius:4px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;background:#fff;padding:12px;margin:0}
dl.facts dt{color:#6b7280} dl.facts dd{margin:0;word-break:break-word}
.nowrap{white-space:nowrap} td.status-cell{min-width:150px;max-width:300px} td.progress-cell{min-width:230px}
.paused-by{margin-top:2px} .paused-reason{font-size:12px;color:#92400e;word-break:break-word}
`;

/** The page around `body`: navigation, the live-update indicator and the page's own script. */
export function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style>
<script src="${SCRIPT_PATH}" defer></script></head><body>
<nav><a href="${OPERATIONS_PAGE_PATH}">Operations</a><a href="${OPERATIONS_PAGE_PATH}/bulk">Bulk actions</a><a href="/admin/queues">Bull Board</a><a href="/metrics">Metrics</a>
<span class="live" id="live" hidden>live</span></nav>
${body}</body></html>`;
}
