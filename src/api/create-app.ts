/**
 * Builds the express app without listening, so tests and the composition root can mount it
 * wherever they need.
 */
import type { Queue } from 'bullmq';
import express, { type RequestHandler } from 'express';
import { CONTEXT_MAX_TOKENS_DEFAULT } from '../domain/context-compose.ts';
import { DEFAULT_SIZE_LIMITS } from '../domain/size-limits.ts';
import { findUnstorableValue, unstorableValueError } from '../domain/validation.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import {
  authenticateOAuthToken,
  type Database,
  DEFAULT_QUOTA,
  failedItemsByType,
  type QuotaDefaults,
} from '../store/index.ts';
import { type BulkActionRunner, bulkActionRunner } from '../tools/bulk-action-runner.ts';
import { OPERATION_TOOL_NAME } from '../tools/operation-tool.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import { requireApiKey, requireBearer } from './auth.ts';
import type { AuthFailureLimiter } from './auth-failures.ts';
import { type AdminCredentials, requireBasicAuth } from './basic-auth.ts';
import { BOARD_PATH, createBoardRouter, type RegisteredWorkers, redirectRenamedQueues } from './board.ts';
import { errorMiddleware, notFoundHandler } from './error-middleware.ts';
import { jsonBody, otherBodyLimit } from './json-body.ts';
import { mcpRouter } from './mcp/mcp-route.ts';
import { issuerOf, oauthRouter, oauthServable } from './mcp/oauth-routes.ts';
import { PROTECTED_RESOURCE_PATH, protectedResourceMetadata } from './mcp/protected-resource.ts';
import { hostForUrl, publicAddress } from './mcp/public-address.ts';
import { docsRouter } from './openapi/docs-route.ts';
import { operationToolBody as operationToolBodyReader } from './operation-body.ts';
import { STREAM_DEFAULTS, type StreamBounds } from './operation-stream.ts';
import { guardOperatorChanges, OPERATOR_CSP, operatorHeaders } from './operator-guard.ts';
import { ADMIN_APPROVALS_PATH as APPROVALS_PATH, adminApprovalsRouter } from './routes/admin-approvals.ts';
import { ADMIN_BULK_ACTIONS_PATH, adminBulkActionsRouter } from './routes/admin-bulk-actions.ts';
import { ADMIN_LIMITS_PATH, adminLimitsRouter } from './routes/admin-limits.ts';
import { adminOperationsRouter, OPERATIONS_PAGE_PATH } from './routes/admin-operations.ts';
import { bulkActionPagesRouter } from './routes/bulk-action-pages.ts';
import { contextRouter } from './routes/context.ts';
import { executionsRouter } from './routes/executions.ts';
import { healthRouter, type Readiness } from './routes/health.ts';
import { homeRouter } from './routes/home.ts';
import { metricsRouter } from './routes/metrics.ts';
import { operationsRouter } from './routes/operations.ts';
import { type ScratchpadRoutesDeps, scratchpadRouter } from './routes/scratchpad.ts';
import { toolsRouter } from './routes/tools.ts';
import { userApprovalRouter } from './routes/user-approval.ts';
import type { StreamSlots } from './stream-slots.ts';
import { traceRequests } from './trace-requests.ts';

export interface AppDeps {
  db: Database;
  tools: ToolRegistry;
  logger: Logger;
  readiness: Readiness;
  metrics: Metrics;
  /** The queues Bull Board shows and /metrics counts. */
  queues: readonly Queue[];
  /** Where Bull Board finds the queues' workers when BullMQ cannot (the Postgres queue backend). */
  registeredWorkers?: RegisteredWorkers;
  admin: AdminCredentials;
  /** OPSPAD_MAX_BODY_BYTES */
  maxBodyBytes: number;
  /** How often the events stream reads the database. */
  eventsPollMs?: number;
  /** Event-stream bounds (OPSPAD_STREAM_*) and the per-key count of open streams. */
  streams?: Partial<Omit<StreamBounds, 'pollMs'>> & { slots?: StreamSlots };
  /** Per-key request limit (after authentication), if any. */
  rateLimit?: RequestHandler;
  /** Failed sign-ins per client address (OPSPAD_AUTH_FAILURE_LIMIT), if any. */
  authFailures?: AuthFailureLimiter;
  /** OPSPAD_API_KEY_CACHE_TTL: how long a key found is trusted without a lookup (0: never). */
  apiKeyCacheTtlMs?: number;
  /** OPSPAD_ADMIN_READONLY */
  adminReadOnly?: boolean;
  /** OPSPAD_MAX_RUNNING_EXECUTIONS: running executions per conversation. */
  maxRunningExecutions?: number;
  /** OPSPAD_MAX_STORED_ITEMS, OPSPAD_MAX_OPEN_OPERATIONS: what the admin API shows as defaults. */
  quota?: QuotaDefaults;
  /** Runs operator bulk actions; without it, one that runs each action as it is created. */
  bulkActions?: BulkActionRunner;
  /** OPSPAD_MAX_BULK_OPERATIONS (default 10,000). */
  maxBulkOperations?: number;
  /** OPSPAD_TRUST_PROXY: which proxies may name the client's address (none when unset). */
  trustProxy?: number | readonly string[];
  /** The structured scratchpad: reorganizer, recitation budget, cadence hook. */
  scratchpad: ScratchpadRoutesDeps;
  /** OPSPAD_CONTEXT_MAX_TOKENS (default 1,500). */
  contextMaxTokens?: number;
  /** `/mcp` (src/api/mcp/): where clients reach the API, and the sessions' bounds. */
  mcp?: HostedMcpOptions;
}

export interface HostedMcpOptions {
  /** OPSPAD_PUBLIC_URL */
  publicUrl?: string;
  /** HOST */
  host: string;
  /** OPSPAD_MCP_ALLOWED_ORIGINS */
  allowedOrigins: readonly string[];
  /** OPSPAD_MCP_MAX_SESSIONS, OPSPAD_MCP_SESSION_IDLE */
  sessions: { maxSessions: number; idleMs: number };
  /** The OAuth flow (OPSPAD_OAUTH, its token lifetimes, the registration bound); off when absent. */
  oauth?: { tokenTtlMs: number; refreshTtlMs: number; registrationLimit?: RequestHandler };
}

const DEFAULT_MCP: HostedMcpOptions = {
  host: '127.0.0.1',
  allowedOrigins: [],
  sessions: { maxSessions: 1000, idleMs: 24 * 3600 * 1000 },
};

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
    throw unstorableValueError(issue);
  }
  next();
};

const DEFAULT_MAX_BULK_OPERATIONS = 10_000;

/** The operation tool's route (as the router matches paths: any case, an optional final slash). */
const OPERATION_TOOL_PATH = new RegExp(`^/conversations/[^/]+/tools/${OPERATION_TOOL_NAME}/?$`, 'i');

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // req.ip, which per-address limits count by, is the connection's unless proxies are named.
  app.set('trust proxy', deps.trustProxy === undefined ? false : deps.trustProxy);
  app.use(homeRouter());
  app.use(healthRouter(deps.readiness));
  app.use(docsRouter());

  const readOnly = deps.adminReadOnly ?? false;
  const adminAuth = requireBasicAuth(deps.admin, { failures: deps.authFailures });
  app.use('/metrics', operatorHeaders(OPERATOR_CSP.data), adminAuth, metricsRouter(deps.metrics, deps.queues));
  app.use(
    BOARD_PATH,
    operatorHeaders(OPERATOR_CSP.board),
    adminAuth,
    guardOperatorChanges({ readOnly }),
    redirectRenamedQueues(deps.queues),
    createBoardRouter(deps.queues, {
      readOnly,
      failedItems: (days) => failedItemsByType(deps.db, days),
      registeredWorkers: deps.registeredWorkers,
    }),
  );
  const bulk = {
    db: deps.db,
    runner: deps.bulkActions ?? bulkActionRunner({ db: deps.db, tools: deps.tools, logger: deps.logger }),
    adminUser: deps.admin.user,
    readOnly,
    maxOperations: deps.maxBulkOperations ?? DEFAULT_MAX_BULK_OPERATIONS,
  };
  app.use(
    OPERATIONS_PAGE_PATH,
    operatorHeaders(OPERATOR_CSP.page),
    adminAuth,
    express.urlencoded({ extended: false, limit: '4kb' }),
    // Before the operation pages: /bulk is not an operation id.
    bulkActionPagesRouter(bulk),
    adminOperationsRouter({
      db: deps.db,
      tools: deps.tools,
      adminUser: deps.admin.user,
      readOnly,
      quota: deps.quota ?? DEFAULT_QUOTA,
      stream: {
        pollMs: deps.eventsPollMs ?? STREAM_DEFAULTS.pollMs,
        heartbeatMs: deps.streams?.heartbeatMs ?? STREAM_DEFAULTS.heartbeatMs,
      },
      accepting: deps.readiness.accepting,
    }),
  );

  app.use(
    APPROVALS_PATH,
    operatorHeaders(OPERATOR_CSP.data),
    adminAuth,
    express.urlencoded({ extended: false, limit: '4kb' }),
    jsonBody({ bytes: 4096, variable: 'the admin API', advice: 'Send only {"approve_above": n}.' }),
    adminApprovalsRouter({ db: deps.db, tools: deps.tools, adminUser: deps.admin.user, readOnly }),
  );
  app.use(
    ADMIN_LIMITS_PATH,
    operatorHeaders(OPERATOR_CSP.data),
    adminAuth,
    adminLimitsRouter({ db: deps.db, quota: deps.quota ?? DEFAULT_QUOTA, readOnly }),
  );
  app.use(ADMIN_BULK_ACTIONS_PATH, operatorHeaders(OPERATOR_CSP.data), adminAuth, adminBulkActionsRouter(bulk));

  const v1 = express.Router();
  v1.use(traceRequests());
  // Authenticate before reading a body that may be tens of megabytes.
  v1.use(requireApiKey(deps.db, deps.authFailures, deps.apiKeyCacheTtlMs));
  if (deps.rateLimit) {
    v1.use(deps.rateLimit);
  }
  // A create carries up to OPSPAD_MAX_ITEMS ids; no other route reads more than it can accept.
  const operationToolLimit = {
    bytes: deps.maxBodyBytes,
    variable: 'OPSPAD_MAX_BODY_BYTES',
    advice: 'Send fewer items per call.',
  };
  // Large creates stream their ids into the database as they arrive (operation-body.ts).
  const operationToolBody = operationToolBodyReader(operationToolLimit, jsonBody(operationToolLimit));
  const otherBody = jsonBody(
    otherBodyLimit(
      deps.maxBodyBytes,
      deps.scratchpad.sizeLimits?.scratchpadBytes ?? DEFAULT_SIZE_LIMITS.scratchpadBytes,
    ),
  );
  v1.use((req, res, next) => (OPERATION_TOOL_PATH.test(req.path) ? operationToolBody : otherBody)(req, res, next));
  v1.use(rejectUnstorableValues);
  v1.use(toolsRouter(deps.tools));
  v1.use(
    contextRouter(deps.db, {
      reciteChars: deps.scratchpad.reciteBudget,
      maxTokens: deps.contextMaxTokens ?? CONTEXT_MAX_TOKENS_DEFAULT,
    }),
  );
  v1.use(scratchpadRouter(deps.scratchpad));
  v1.use(executionsRouter(deps.db, deps.maxRunningExecutions));
  v1.use(userApprovalRouter(deps.tools, deps.db));
  v1.use(
    operationsRouter({
      db: deps.db,
      bounds: {
        pollMs: deps.eventsPollMs ?? STREAM_DEFAULTS.pollMs,
        heartbeatMs: deps.streams?.heartbeatMs ?? STREAM_DEFAULTS.heartbeatMs,
        idleMs: deps.streams?.idleMs ?? STREAM_DEFAULTS.idleMs,
        keyCheckMs: deps.streams?.keyCheckMs ?? STREAM_DEFAULTS.keyCheckMs,
      },
      slots: deps.streams?.slots,
      accepting: deps.readiness.accepting,
    }),
  );
  app.use('/v1', v1);

  const mcpOptions = deps.mcp ?? DEFAULT_MCP;
  const address = publicAddress(mcpOptions);
  const budgets = {
    reciteChars: deps.scratchpad.reciteBudget,
    maxTokens: deps.contextMaxTokens ?? CONTEXT_MAX_TOKENS_DEFAULT,
  };
  const resourceMetadataUrl = (req: express.Request) => `${address.origin(req)}${PROTECTED_RESOURCE_PATH}`;
  const oauth =
    mcpOptions.oauth && oauthServable(mcpOptions.publicUrl ?? `http://${hostForUrl(mcpOptions.host)}`)
      ? mcpOptions.oauth
      : undefined;
  if (mcpOptions.oauth && !oauth) {
    deps.logger.warn(
      { public_url: mcpOptions.publicUrl },
      'OAuth for /mcp is not served: it needs an https OPSPAD_PUBLIC_URL (or a loopback one); clients use API keys',
    );
  }
  app.get(PROTECTED_RESOURCE_PATH, address.guard, (req, res) => {
    res.json(protectedResourceMetadata(address.mcpUrl(req), oauth ? [issuerOf(address.origin(req))] : []));
  });
  if (oauth) {
    app.use(
      oauthRouter({
        db: deps.db,
        address,
        operatorAuth: adminAuth,
        operator: deps.admin.user,
        readOnly,
        tokenTtlMs: oauth.tokenTtlMs,
        refreshTtlMs: oauth.refreshTtlMs,
        registrationLimit: oauth.registrationLimit,
      }),
    );
  }
  const mcp = express.Router();
  mcp.use(address.guard);
  mcp.use(traceRequests());
  mcp.use(
    requireBearer(deps.db, {
      failures: deps.authFailures,
      cacheTtlMs: deps.apiKeyCacheTtlMs,
      verifyOther: oauth ? (token) => authenticateOAuthToken(deps.db, token) : undefined,
      missing: 'Send an API key (or an OAuth access token) as "Authorization: Bearer <token>".',
      refused: 'The API key or access token is not valid, expired or was revoked.',
      challenge: (req, given) =>
        `Bearer realm="opspad", ${given ? 'error="invalid_token", ' : ''}resource_metadata="${resourceMetadataUrl(req)}"`,
    }),
  );
  if (deps.rateLimit) {
    mcp.use(deps.rateLimit);
  }
  mcp.use(jsonBody(operationToolLimit));
  mcp.use(rejectUnstorableValues);
  mcp.use(
    mcpRouter({
      db: deps.db,
      tools: deps.tools,
      budgets,
      address,
      sessions: mcpOptions.sessions,
      logger: deps.logger,
    }),
  );
  app.use('/mcp', mcp);

  app.use(notFoundHandler);
  app.use(errorMiddleware(deps.logger));
  return app;
}
