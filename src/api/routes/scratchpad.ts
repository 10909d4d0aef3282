/**
 * The structured scratchpad over REST:
 * - `GET  /v1/conversations/:id/scratchpad` — the current pad and its version;
 * - `PUT  /v1/conversations/:id/scratchpad` — a whole new pad, based on `expected_version`;
 * - `GET  /v1/conversations/:id/scratchpad/versions` — history, newest first;
 * - `GET  /v1/conversations/:id/scratchpad/events` — reorganization outcomes;
 * - `PUT  /v1/conversations/:id/scratchpad/settings` — cadence and retries;
 * - `POST /v1/conversations/:id/scratchpad/reorganize` — reorganize now;
 * - `GET  /v1/conversations/:id/context-renders` — what each context render told the assistant.
 */
import { Router } from 'express';
import { z } from 'zod';
import { completePad } from '../../domain/scratchpad.ts';
import {
  checkPadInputSize,
  PadSettingsInput,
  PutScratchpadBody,
  ReorganizeBody,
} from '../../domain/scratchpad-input.ts';
import { DEFAULT_SIZE_LIMITS } from '../../domain/size-limits.ts';
import { MAX_INT4, parseOrThrow } from '../../domain/validation.ts';
import { type ReorganizeDeps, reorganizeScratchpad } from '../../reorganizer/reorganize.ts';
import {
  type ConversationScope,
  ensureConversation,
  getPad,
  listContextRenders,
  listPadVersions,
  listScratchpadEvents,
  updatePadSettings,
  writePad,
} from '../../store/index.ts';
import { principalOf } from '../auth.ts';
import { conversationIdOf } from '../params.ts';

export const Page = z.object({
  // Versions are Postgres integers; event ids are bigints, which every safe integer fits.
  before: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_INT4, `must be at most ${MAX_INT4}: a next_before returned by a previous page`)
    .optional(),
  after: z.coerce.number().int().min(0).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});

export interface ScratchpadRoutesDeps extends ReorganizeDeps {
  onReorganizeDue?(scope: ConversationScope, version: number): Promise<void>;
}

export function scratchpadRouter(deps: ScratchpadRoutesDeps): Router {
  const router = Router();
  const scopeOf = (req: { params: unknown }, res: Parameters<typeof principalOf>[0]): ConversationScope => ({
    organizationId: principalOf(res).organizationId,
    conversationId: conversationIdOf(req.params),
  });

  router.get('/conversations/:conversationId/scratchpad', async (req, res) => {
    const stored = await getPad(deps.db, scopeOf(req, res));
    res.json({ scratchpad: { version: stored.version, ...stored.pad }, settings: stored.settings });
  });

  router.put('/conversations/:conversationId/scratchpad', async (req, res) => {
    const scope = scopeOf(req, res);
    const maxBytes = (deps.sizeLimits ?? DEFAULT_SIZE_LIMITS).scratchpadBytes;
    checkPadInputSize(req.body, ['scratchpad'], maxBytes);
    const body = parseOrThrow(PutScratchpadBody, req.body, 'scratchpad');
    const result = await writePad(deps.db, scope, {
      expectedVersion: body.expected_version,
      build: () => completePad(body.scratchpad, body.task),
      source: 'api',
      reason: body.reason ?? 'replaced over the API',
      reciteBudget: deps.reciteBudget,
      maxBytes,
    });
    if (result.reorganizeDue) {
      await deps.onReorganizeDue?.(scope, result.version);
    }
    res.json({ scratchpad: { version: result.version, ...result.pad }, reorganization_queued: result.reorganizeDue });
  });

  router.get('/conversations/:conversationId/scratchpad/versions', async (req, res) => {
    const page = parseOrThrow(Page, req.query, 'query');
    const versions = await listPadVersions(deps.db, scopeOf(req, res), page.before ?? MAX_INT4, page.limit);
    res.json({
      versions,
      next_before: versions.length === page.limit ? (versions.at(-1)?.version ?? null) : null,
    });
  });

  router.get('/conversations/:conversationId/scratchpad/events', async (req, res) => {
    const page = parseOrThrow(Page, req.query, 'query');
    const scope = scopeOf(req, res);
    res.json({ events: await listScratchpadEvents(deps.db, scope, page.after ?? 0, page.limit) });
  });

  router.put('/conversations/:conversationId/scratchpad/settings', async (req, res) => {
    const settings = parseOrThrow(PadSettingsInput, req.body, 'settings');
    res.json({ settings: await updatePadSettings(deps.db, scopeOf(req, res), settings) });
  });

  router.post('/conversations/:conversationId/scratchpad/reorganize', async (req, res) => {
    const scope = scopeOf(req, res);
    const body = parseOrThrow(ReorganizeBody, req.body ?? {}, 'reorganize request');
    // Created on first use, as everywhere, since the outcome is recorded as an event of the
    // conversation.
    await ensureConversation(deps.db, scope, { lock: false });
    const outcome = await reorganizeScratchpad(deps, scope, {
      reason: body.reason ?? 'requested over the API',
      recentMessages: body.recent_messages,
    });
    res.json(outcome);
  });

  router.get('/conversations/:conversationId/context-renders', async (req, res) => {
    const page = parseOrThrow(Page, req.query, 'query');
    const scope = scopeOf(req, res);
    res.json({ renders: await listContextRenders(deps.db, scope, page.limit) });
  });

  return router;
}
