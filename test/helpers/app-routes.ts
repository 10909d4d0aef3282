/**
 * The routes an app built by createApp registers, found by walking its express router (the one
 * the service serves): `"GET /v1/operations/:operationId"`, one per method and path, and the
 * paths where something other than a router is mounted (Bull Board, middleware).
 */
import { createApp } from '../../src/api/create-app.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createToolRegistry } from '../../src/tools/registry.ts';

interface Layer {
  rawPath?: unknown;
  route?: { path: string; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

export interface RegisteredRoutes {
  routes: string[];
  mounts: string[];
}

function joinPath(prefix: string, path: string): string {
  const joined = `${prefix}${path === '/' ? '' : path}`;
  return joined === '' ? '/' : joined;
}

export function registeredRoutes(): RegisteredRoutes {
  const db = {} as never;
  const tools = createToolRegistry({ db, maxItems: 10, hasHandler: () => false, reciteBudget: 4000 });
  const app = createApp({
    db,
    tools,
    logger: {} as never,
    metrics: createMetrics(),
    queues: [],
    admin: { user: 'admin', password: 'password' },
    maxBodyBytes: 1024,
    rateLimit: (_req, _res, next) => next(),
    readiness: { checks: {}, accepting: () => true },
    scratchpad: { db, reorganizer: {} as never, reciteBudget: 4000, logger: {} as never },
  });
  const found: RegisteredRoutes = { routes: [], mounts: [] };
  const walk = (stack: readonly Layer[], prefix: string) => {
    for (const layer of stack) {
      const path = typeof layer.rawPath === 'string' ? layer.rawPath : String(layer.rawPath);
      if (layer.route) {
        for (const method of Object.keys(layer.route.methods)) {
          found.routes.push(`${method.toUpperCase()} ${joinPath(prefix, layer.route.path)}`);
        }
      } else if (layer.handle?.stack) {
        walk(layer.handle.stack, joinPath(prefix, path) === '/' ? '' : joinPath(prefix, path));
      } else if (path !== '/') {
        found.mounts.push(joinPath(prefix, path));
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack, '');
  return { routes: [...new Set(found.routes)].sort(), mounts: [...new Set(found.mounts)].sort() };
}
