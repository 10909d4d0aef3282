/**
 * The value parsers of opspad's settings (ports, URLs, durations, lists, flags, rates), each
 * failing with a message that says what a valid value looks like. The settings themselves are
 * in env.ts.
 */
import { z } from 'zod';
import { parsePostgresUrl } from './postgres-url.ts';

export const port = z.coerce
  .number({ error: 'must be a port number' })
  .int()
  .min(0)
  .max(65535, 'must be at most 65535');
export const positiveInt = z.coerce
  .number({ error: 'must be a whole number' })
  .int('must be a whole number')
  .positive('must be greater than 0');

/** A string that is not blank, trimmed. */
export const text = z.string().trim().min(1);

export const url = (protocols: readonly string[]) =>
  z
    .string()
    .trim()
    .refine(
      (value) => {
        try {
          return protocols.includes(new URL(value).protocol);
        } catch {
          return false;
        }
      },
      `must be a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`,
    );

/**
 * A Postgres URL, the libpq multi-host form included (postgres-url.ts): one host is checked as
 * any URL; a host list or target_session_attrs as libpq would read them.
 */
export const postgresUrl = z
  .string()
  .trim()
  .superRefine((value, ctx) => {
    const multi = /^postgres(?:ql)?:\/\/(?:[^@/?#]*@)?[^/?#]*,/.test(value) || /[?&]target_session_attrs=/.test(value);
    if (!multi) {
      const single = url(['postgres:', 'postgresql:']).safeParse(value);
      for (const issue of single.success ? [] : single.error.issues) {
        ctx.addIssue({ code: 'custom', message: issue.message });
      }
      return;
    }
    try {
      parsePostgresUrl(value);
    } catch (error) {
      ctx.addIssue({
        code: 'custom',
        message: `must be a Postgres URL, one host or libpq's host list (postgresql://user@host1:5432,host2:5432/db?target_session_attrs=read-write): ${(error as Error).message}`,
      });
    }
  });

export const list = z
  .string()
  .transform((value) =>
    value
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part.length > 0),
  )
  .pipe(z.array(z.string()));

const DURATION_UNITS_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

const milliseconds = z.union([z.number(), z.string()]).transform((value, ctx) => {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(String(value));
  if (!match) {
    ctx.addIssue({ code: 'custom', message: 'must be a duration such as 500ms, 30s, 15m, 12h or 7d' });
    return z.NEVER;
  }
  const unit = (match[2] ?? 'ms') as keyof typeof DURATION_UNITS_MS;
  return Math.round(Number(match[1]) * DURATION_UNITS_MS[unit]);
});

/** A duration such as `7d`, `12h`, `30m`, `15s`, `500ms`, or a plain number of milliseconds. */
export const duration = milliseconds.pipe(z.number().int().positive('must be longer than 0'));

/** A {@link duration} that may also be 0 (the feature it bounds is off). */
export const durationOrZero = milliseconds.pipe(z.number().int().min(0, 'must be 0 or longer'));

/** `<count>/<duration>`, e.g. `1000/1s` or `600/1m`: at most count events per window. */
export const perWindow = z
  .string()
  .regex(/^\s*\d+\s*\/\s*\d+(?:\.\d+)?\s*(?:ms|s|m|h|d)?\s*$/, 'must look like 1000/1s or 600/1m')
  .transform((value) => {
    const [count, window] = value.split('/') as [string, string];
    return { max: Number(count.trim()), windowMs: duration.parse(window.trim()) };
  })
  .pipe(z.object({ max: z.number().int().positive('the count must be above 0'), windowMs: z.number() }));

/** `true` or `false` (also 1/0, yes/no, on/off). */
export const flag = z.union([z.boolean(), z.string()]).transform((value, ctx) => {
  const text = String(value).trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(text)) {
    return true;
  }
  if (['false', '0', 'no', 'off'].includes(text)) {
    return false;
  }
  ctx.addIssue({ code: 'custom', message: 'must be true or false' });
  return z.NEVER;
});

/**
 * Express's `trust proxy`: how many proxies in front of opspad to trust (a number), or which
 * ones (addresses, subnets, `loopback`, `linklocal`, `uniquelocal`). Unset: none, and a client's
 * address is the connection's. Trusting every proxy (`true`) is refused: any client could then
 * choose its own address with X-Forwarded-For and escape per-address limits.
 */
export const trustProxy = z
  .string()
  .trim()
  .transform((value, ctx) => {
    if (/^\d+$/.test(value)) {
      return Number(value);
    }
    const parts = value
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part.length > 0);
    const valid = (part: string) =>
      ['loopback', 'linklocal', 'uniquelocal'].includes(part) || /^[0-9A-Fa-f:.]+(?:\/\d{1,3})?$/.test(part);
    if (parts.length === 0 || !parts.every(valid)) {
      ctx.addIssue({
        code: 'custom',
        message: 'must be a number of proxies, or addresses, subnets, loopback, linklocal or uniquelocal',
      });
      return z.NEVER;
    }
    return parts;
  });

/** Words that turn a retention setting off: what it covers is kept for good. */
const OFF_WORDS = ['0', 'off', 'never', 'false', 'no'];

/** A retention period: a duration (`30d`, `12h`, `90s`), or `0`/`off` (null: never deleted). */
export const retention = z.union([z.number(), z.string()]).transform((value, ctx): number | null => {
  if (OFF_WORDS.includes(String(value).trim().toLowerCase())) {
    return null;
  }
  const parsed = duration.safeParse(value);
  if (!parsed.success) {
    ctx.addIssue({ code: 'custom', message: 'must be a duration such as 30d, 12h or 90s, or 0/off to keep for good' });
    return z.NEVER;
  }
  return parsed.data;
});

/** How many to keep: a whole number above 0, or `0`/`off` (null: keep every one). */
export const keepCount = z.union([z.number(), z.string()]).transform((value, ctx): number | null => {
  const text = String(value).trim().toLowerCase();
  if (OFF_WORDS.includes(text)) {
    return null;
  }
  if (!/^\d+$/.test(text)) {
    ctx.addIssue({ code: 'custom', message: 'must be a whole number, or 0/off to keep every one' });
    return z.NEVER;
  }
  return Number(text);
});

/**
 * `REDIS_CLUSTER_NODES`: the seed nodes of a Redis Cluster, comma-separated, each `host:port` or a
 * `redis://` / `rediss://` URL (user and password in the URL; `rediss` for TLS). ioredis learns
 * the other nodes from any one that answers. Normalized to URLs; the entries must agree on the
 * scheme and on the credentials, which apply to every node of the cluster.
 */
export const clusterNodes = z.string().transform((value, ctx) => {
  const entries = value
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
  const urls: URL[] = [];
  for (const entry of entries) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(entry) ? entry : `redis://${entry}`);
    } catch {
      parsed = undefined;
    }
    if (!parsed || !['redis:', 'rediss:'].includes(parsed.protocol) || parsed.hostname === '') {
      ctx.addIssue({
        code: 'custom',
        message: `entry ${urls.length + 1} must be host:port or a URL starting with redis:// or rediss://`,
      });
      return z.NEVER;
    }
    urls.push(parsed);
  }
  if (urls.length === 0) {
    ctx.addIssue({ code: 'custom', message: 'must name at least one node, e.g. 10.0.0.1:7000,10.0.0.2:7000' });
    return z.NEVER;
  }
  const schemes = new Set(urls.map((url) => url.protocol));
  const credentials = new Set(
    urls.filter((url) => url.username || url.password).map((url) => `${url.username}:${url.password}`),
  );
  if (schemes.size > 1 || credentials.size > 1) {
    ctx.addIssue({
      code: 'custom',
      message: 'the nodes must all use redis:// or all rediss://, with the same user and password (one cluster)',
    });
    return z.NEVER;
  }
  return urls.map((url) => url.toString());
});

/**
 * OpenTelemetry's `key=value,key=value` lists (OTEL_EXPORTER_OTLP_HEADERS,
 * OTEL_RESOURCE_ATTRIBUTES), values percent-decoded as the specification says.
 */
export const keyValueList = z.string().transform((value, ctx) => {
  const pairs: Record<string, string> = {};
  for (const part of value.split(',')) {
    if (part.trim() === '') {
      continue;
    }
    const at = part.indexOf('=');
    const key = at > 0 ? part.slice(0, at).trim() : '';
    if (!key) {
      ctx.addIssue({ code: 'custom', message: 'must be key=value pairs separated by commas' });
      return z.NEVER;
    }
    try {
      pairs[key] = decodeURIComponent(part.slice(at + 1).trim());
    } catch {
      ctx.addIssue({ code: 'custom', message: `the value of "${key.slice(0, 64)}" is not valid percent-encoding` });
      return z.NEVER;
    }
  }
  return pairs;
});
