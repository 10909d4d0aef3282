/**
 * Builds the express app without listening, so tests and the composition root can mount it
 * wherever they need.
 */
import type { Queue } from 'bullmq';
import express, { type RequestHandler } from 'express';
import { AppError } from '../domain/errors.ts';
import { findUnstorableValue } from '../domain/validation.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { Database } from '../store/index.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import { requireApiKey } from './auth.ts';
import { type AdminCredentials, requireBasicAuth } from './basic-auth.ts';
import { BOARD_PATH, createBoardRouter } from './board.ts';
import { errorMiddleware, notFoundHandler } from './error-middleware.ts';
import { docsRouter } from './openapi/docs-route.ts';
import { adminOperationsRouter, OPERATIONS_PAGE_PATH } from './routes/admin-operations.ts';
import { contextRouter } from './routes/context.ts';
import { executionsRouter } from './routes/executions.ts';
import { healthRouter, type Readiness } from './routes/health.ts';
import { metricsRouter } from './routes/metrics.ts';
import { operationsRouter } from './routes/operations.ts';
import { type ScratchpadRoutesDeps, scratchpadRouter } from './routes/scratchpad.ts';
import { toolsRouter } from './routes/tools.ts';

export interface AppDeps {
  db: Database;
  tools: ToolRegistry;
  logger: Logger;
  readiness: Readiness;
  metrics: Metrics;
  /** The queues Bull Board shows and /metrics counts. */
  queues: readonly Queue[];
  admin: AdminCredentials;
  /** OPSPAD_MAX_BODY_BYTES */
  maxBodyBytes: number;
  /** How often the events stream reads the database. */
  eventsPollMs?: number;
  /** Per-key request limit (after authentication), if any. */
  rateLimit?: RequestHandler;
  /** The structured scratchpad: reorganizer, recitation budget, cadence hook. */
  scratchpad: ScratchpadRoutesDeps;
}

/**
 * Postgres text cannot hold U+0000, jsonb refuses lone surrogates (and text stores them as
 * U+FFFD), and a body nested thousands of levels deep overflows the stack when serialized for
 * jsonb: refuse them at the edge with an error that names the field, instead of letting the
 * database fail halfway through a request. The parsed body is checked, not its bytes: a JSON
 * string may spell an innocent backslash followed by "u0000".
 */
const rejectUnstorableValues: RequestHandler = (req, _res, next) => {
  const issue = findUnstorableValue(req.body);
  if (issue) {
    throw new AppError('validation_failed', `Invalid input: ${issue.field}: ${issue.message}`, {
      issues: [issue],
      total_issues: 1,
    });
  }
  next();
};

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.use(healthRouter(deps.readiness));
  app.use(docsRouter());

  const adminAuth = requireBasicAuth(deps.admin);
  app.use('/metrics', adminAuth, metricsRouter(deps.metrics, deps.queues));
  app.use(BOARD_PATH, adminAuth, createBoardRouter(deps.queues, { readOnly: false }));
  app.use(
    OPERATIONS_PAGE_PATH,
    adminAuth,
    express.urlencoded({ extended: false, limit: '4kb' }),
    adminOperationsRouter({ db: deps.db, tools: deps.tools, adminUser: deps.admin.user }),
  );

  const v1 = express.Router();
  // Authenticate before reading a body that may be tens of megabytes.
  v1.use(requireApiKey(deps.db));
  if (deps.rateLimit) {
    v1.use(deps.rateLimit);
  }
  v1.use(express.json({ limit: deps.maxBodyBytes }));
  v1.use(rejectUnstorableValues);
  v1.use(toolsRouter(deps.tools));
  v1.use(contextRouter(deps.db, deps.scratchpad.reciteBudget));
  v1.use(scratchpadRouter(deps.scratchpad));
  v1.use(executionsRouter(deps.db));
  v1.use(operationsRouter(deps.db, deps.eventsPollMs ?? 1000, deps.readiness.accepting));
  app.use('/v1', v1);

  app.use(notFoundHandler);
  app.use(errorMiddleware(deps.logger, deps.maxBodyBytes));
  return app;
}
