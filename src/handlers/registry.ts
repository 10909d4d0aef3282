/**
 * The handlers this process knows, by operation_type: the built-ins, those passed in code when
 * opspad is embedded, and those loaded from the modules named in OPSPAD_HANDLERS.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { KEY_LIMIT_BOUNDS } from '../domain/limit-overrides.ts';
import { validationError } from '../domain/validation.ts';
import { type Handler, isBatchHandler } from './types.ts';

export interface HandlerRegistry {
  get(type: string): Handler | undefined;
  has(type: string): boolean;
  readonly types: readonly string[];
}

/**
 * `itemConcurrency` 1: a handler written before it existed may count on one item at a time
 * (a provider's per-key rate, shared state); running more is what the handler declares.
 */
export const HANDLER_DEFAULTS = { concurrency: 4, itemConcurrency: 1, attempts: 3, backoffMs: 200 } as const;

const HandlerSettingsSchema = z.object({
  type: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1 to 64 letters, digits, "_", "-" or "." (it names a queue)'),
  concurrency: z.number().int().min(1).max(1000).optional(),
  itemConcurrency: z.number().int().min(1).max(1000).optional(),
  batchSize: z.number().int().min(1).max(10_000).optional(),
  rateLimit: z.object({ max: z.number().int().min(1), durationMs: z.number().int().min(1) }).optional(),
  limits: z
    .object({
      key: z
        .custom<(source: unknown) => unknown>((value) => typeof value === 'function', 'must be a function')
        .optional(),
      rate: z
        .object({
          max: z.number().int().min(KEY_LIMIT_BOUNDS.rateMax.min).max(KEY_LIMIT_BOUNDS.rateMax.max),
          durationMs: z.number().int().min(KEY_LIMIT_BOUNDS.intervalMs.min).max(KEY_LIMIT_BOUNDS.intervalMs.max),
        })
        .optional(),
      concurrency: z
        .number()
        .int()
        .min(KEY_LIMIT_BOUNDS.concurrency.min)
        .max(KEY_LIMIT_BOUNDS.concurrency.max)
        .optional(),
    })
    .refine(
      (limits) => limits.rate !== undefined || limits.concurrency !== undefined,
      'give a rate, a concurrency or both',
    )
    .optional(),
  attempts: z.number().int().min(1).max(100).optional(),
  backoffMs: z.number().int().min(0).max(3_600_000).optional(),
  batchTimeoutMs: z.number().int().min(1).max(86_400_000).optional(),
});

export function createHandlerRegistry(handlers: readonly Handler[]): HandlerRegistry {
  const byType = new Map<string, Handler>();
  for (const handler of handlers) {
    const parsed = HandlerSettingsSchema.safeParse(handler);
    if (!parsed.success) {
      throw validationError(parsed.error, `handler "${String((handler as { type?: unknown }).type)}"`);
    }
    if (typeof (handler as { handle?: unknown }).handle !== 'function' && !isBatchHandler(handler)) {
      throw new Error(`Handler "${handler.type}" needs a handle(itemId, ctx) or handleBatch(itemIds, ctx) function.`);
    }
    // A rate-limited type runs fixed-size batches, so the limiter (which counts batches) can
    // turn "items per interval" into "batches per interval" exactly.
    const normalized =
      handler.rateLimit && handler.batchSize === undefined
        ? (Object.assign(Object.create(Object.getPrototypeOf(handler)), handler, {
            batchSize: Math.min(handler.rateLimit.max, 100),
          }) as Handler)
        : handler;
    // Later registrations replace earlier ones, so an embedder can override a built-in.
    byType.set(handler.type, normalized);
  }
  return {
    get: (type) => byType.get(type),
    has: (type) => byType.has(type),
    types: [...byType.keys()],
  };
}

function looksLikeHandler(value: unknown): value is Handler {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';
}

const TYPESCRIPT_MODULE = /\.(c|m)?tsx?$/i;

/**
 * Node runs a `.ts` module only with type stripping (Node 22.6+, on by default from 23.6) or a
 * loader such as tsx: without either, say how to get one instead of Node's bare
 * "Unknown file extension".
 */
function importFailure(path: string, baseDir: string, error: unknown): Error {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'ERR_UNKNOWN_FILE_EXTENSION' && TYPESCRIPT_MODULE.test(path)) {
    return new Error(
      `OPSPAD_HANDLERS: ${path} is TypeScript, which this Node process cannot load as is. Compile it to .js, or run opspad with a loader: NODE_OPTIONS="--import tsx" (tsx installed in your project), or NODE_OPTIONS=--experimental-strip-types on Node 22.6 or newer.`,
      { cause: error },
    );
  }
  if (code === 'ERR_MODULE_NOT_FOUND' && String((error as Error).message).includes(resolve(baseDir, path))) {
    return new Error(`OPSPAD_HANDLERS: ${path} does not exist (paths are relative to ${baseDir}).`, {
      cause: error,
    });
  }
  return new Error(`OPSPAD_HANDLERS: loading ${path} failed: ${(error as Error)?.message ?? String(error)}`, {
    cause: error,
  });
}

/**
 * Imports handler modules. A module exports a handler or an array of them, as its default
 * export or as `handlers`. `.js` and `.mjs` load everywhere; `.ts` where Node can run it (see
 * {@link importFailure}).
 */
export async function loadHandlerModules(paths: readonly string[], baseDir = process.cwd()): Promise<Handler[]> {
  const handlers: Handler[] = [];
  for (const path of paths) {
    let module: Record<string, unknown>;
    try {
      module = (await import(pathToFileURL(resolve(baseDir, path)).href)) as Record<string, unknown>;
    } catch (error) {
      throw importFailure(path, baseDir, error);
    }
    const exported = module.handlers ?? module.default;
    const list = Array.isArray(exported) ? exported : [exported];
    if (list.length === 0 || !list.every(looksLikeHandler)) {
      throw new Error(
        `OPSPAD_HANDLERS: ${path} must export a handler ({type, handle} or {type, handleBatch}) or an array of them, as default or as "handlers".`,
      );
    }
    handlers.push(...list);
  }
  return handlers;
}
