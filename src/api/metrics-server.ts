/**
 * The metrics port (OPSPAD_METRICS_PORT): `/metrics` behind the operator sign-in, exactly as the
 * API serves it, plus `/healthz` and `/readyz`, for processes that run workers without the API
 * (`opspad worker`) and so have no other HTTP surface. It listens on OPSPAD_METRICS_HOST,
 * loopback by default: a scraper elsewhere is let in on purpose, not by accident.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { Queue } from 'bullmq';
import express from 'express';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { AuthFailureLimiter } from './auth-failures.ts';
import { type AdminCredentials, requireBasicAuth } from './basic-auth.ts';
import { errorMiddleware, notFoundHandler } from './error-middleware.ts';
import { OPERATOR_CSP, operatorHeaders } from './operator-guard.ts';
import { healthRouter, type Readiness } from './routes/health.ts';
import { metricsRouter } from './routes/metrics.ts';

export interface MetricsAppDeps {
  metrics: Metrics;
  /** The queues whose depths a scrape reads. */
  queues: readonly Queue[];
  admin: AdminCredentials;
  authFailures?: AuthFailureLimiter;
  readiness: Readiness;
  logger: Logger;
  /** OPSPAD_TRUST_PROXY, for the sign-in limiter's client address. */
  trustProxy?: number | readonly string[];
}

export function createMetricsApp(deps: MetricsAppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', deps.trustProxy === undefined ? false : deps.trustProxy);
  app.use(healthRouter(deps.readiness));
  app.use(
    '/metrics',
    operatorHeaders(OPERATOR_CSP.data),
    requireBasicAuth(deps.admin, { failures: deps.authFailures }),
    metricsRouter(deps.metrics, deps.queues),
  );
  app.use(notFoundHandler);
  app.use(errorMiddleware(deps.logger));
  return app;
}

/** Serves the metrics app on `port` of `host`; rejects if it cannot listen (the port is taken). */
export async function listenMetrics(deps: MetricsAppDeps, port: number, host: string): Promise<Server> {
  const listening = createMetricsApp(deps).listen(port, host);
  await once(listening, 'listening');
  return listening;
}
