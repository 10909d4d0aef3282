/**
 * The structured scratchpad of each conversation: the current pad, every earlier version, the
 * reorganization events and what each context render told the assistant.
 *
 * Writes lock the conversation row first, so writers of one pad queue up; each write compares
 * the version it was based on (optimistic concurrency) and appends a version row in the same
 * transaction. The recitation is rendered once per version and stored with it.
 */
import { SCRATCHPAD_EVENT_STATUSES } from '../domain/conversation-output.ts';
import { AppError } from '../domain/errors.ts';
import {
  RECITATION_FORMAT,
  RECITE_MAX_CHARS_DEFAULT,
  type RecitationSelection,
  recitePad,
} from '../domain/recitation.ts';
import {
  citationIssues,
  countsOfPad,
  emptyPad,
  entryCountIssues,
  type Pad,
  type PadCounts,
  type PadIssue,
  recordRefIssues,
  recordRefTarget,
} from '../domain/scratchpad.ts';
import { PAD_TOO_LARGE_ADVICE } from '../domain/scratchpad-input.ts';
import { checkJsonTextBytes, DEFAULT_SIZE_LIMITS } from '../domain/size-limits.ts';
import { type ConversationScope, ensureConversation } from './conversation-repo.ts';
import type { Database, Queryable } from './db.ts';

export interface PadSettings {
  /** Reorganize after this many writes; 0 turns the cadence off. */
  reorganize_every: number;
  /** Extra tries when a reorganizer's output is rejected or its call fails. */
  schema_retries: number;
  /** How many recent messages a reorganization may cite as `turn:N` refs. */
  max_recent_messages: number;
}

export const PAD_SETTINGS_DEFAULTS: PadSettings = { reorganize_every: 3, schema_retries: 1, max_recent_messages: 8 };

export interface StoredPad {
  version: number;
  pad: Pad;
  settings: PadSettings;
  writesSinceReorganize: number;
  reorganizedVersion: number;
  recitation: StoredRecitation | null;
}

/**
 * The recitation stored with a pad version: its standalone text and, since format 2, the
 * selection the context fragment renders on each turn with the aliases of its operations.
 */
export interface StoredRecitation {
  budget: number;
  text: string;
  format?: number;
  selection?: RecitationSelection;
}

interface PadRow {
  version: number;
  pad: Pad;
  settings: Partial<PadSettings>;
  writes_since_reorganize: number;
  reorganized_version: number;
  recitation: StoredRecitation | null;
}

const PAD_COLUMNS = 'version, pad, settings, writes_since_reorganize, reorganized_version, recitation';

function fromRow(row: PadRow): StoredPad {
  return {
    version: row.version,
    pad: row.pad,
    settings: { ...PAD_SETTINGS_DEFAULTS, ...row.settings },
    writesSinceReorganize: row.writes_since_reorganize,
    reorganizedVersion: row.reorganized_version,
    recitation: row.recitation,
  };
}

/** The conversation's pad, or version 0 and an empty pad if none was written. */
export async function getPad(db: Queryable, scope: ConversationScope): Promise<StoredPad> {
  const rows = await db.query<PadRow>(
    `SELECT ${PAD_COLUMNS} FROM scratchpad WHERE conversation_id = $1 AND organization_id = $2`,
    [scope.conversationId, scope.organizationId],
  );
  const row = rows[0];
  return row
    ? fromRow(row)
    : {
        version: 0,
        pad: emptyPad(),
        settings: PAD_SETTINGS_DEFAULTS,
        writesSinceReorganize: 0,
        reorganizedVersion: 0,
        recitation: null,
      };
}

function invalidPad(issues: readonly PadIssue[]): AppError {
  const shown = issues.slice(0, 20);
  return new AppError(
    'validation_failed',
    `Invalid scratchpad: ${shown.map((i) => `${i.field}: ${i.message}`).join('; ')}${issues.length > 20 ? ` (and ${issues.length - 20} more)` : ''}`,
    { issues: shown, total_issues: issues.length },
  );
}

/** Refs to opspad's own records must name an operation (or item) of this conversation. */
async function missingRecordRefs(tx: Queryable, scope: ConversationScope, pad: Pad): Promise<PadIssue[]> {
  const targets = pad.refs.map((ref, index) => ({ index, target: recordRefTarget(ref) }));
  const operationIds = [...new Set(targets.flatMap((t) => (t.target ? [t.target.operationId] : [])))];
  if (operationIds.length === 0) {
    return [];
  }
  const found = await tx.query<{ id: string }>(
    `SELECT id FROM assistant_operation WHERE id = ANY($1::uuid[]) AND conversation_id = $2 AND organization_id = $3`,
    [operationIds, scope.conversationId, scope.organizationId],
  );
  const existing = new Set(found.map((r) => r.id));
  const itemTargets = targets.flatMap((t) =>
    t.target?.kind === 'item' && existing.has(t.target.operationId) ? [{ ...t.target, index: t.index }] : [],
  );
  const foundItems =
    itemTargets.length === 0
      ? []
      : await tx.query<{ operation_id: string; item_id: string }>(
          `SELECT i.operation_id, i.item_id FROM assistant_operation_item i
           JOIN unnest($1::uuid[], $2::text[]) AS t(operation_id, item_id)
             ON i.operation_id = t.operation_id AND i.item_id = t.item_id`,
          [itemTargets.map((t) => t.operationId), itemTargets.map((t) => t.itemId)],
        );
  const existingItems = new Set(foundItems.map((r) => `${r.operation_id}:${r.item_id}`));
  const issues: PadIssue[] = [];
  for (const { index, target } of targets) {
    if (!target) {
      continue;
    }
    if (!existing.has(target.operationId)) {
      issues.push({ field: `refs[${index}].id`, message: `no operation ${target.operationId} in this conversation` });
    } else if (target.kind === 'item' && !existingItems.has(`${target.operationId}:${target.itemId}`)) {
      issues.push({
        field: `refs[${index}].id`,
        message: `operation ${target.operationId} has no item "${target.itemId}"`,
      });
    }
  }
  return issues;
}

export interface PadWrite {
  /** The version the change is based on; null or undefined: whatever is current. */
  expectedVersion?: number | null;
  /** Builds the next pad from the current one (inside the lock). Throw AppError to refuse. */
  build(current: Pad, currentVersion: number): Pad;
  source: 'tool' | 'api' | 'reorganizer';
  reason: string;
  metadata?: Record<string, unknown>;
  /** Reorganizations do not count toward the cadence, and reset it. */
  isReorganization?: boolean;
  reciteBudget?: number;
  /** OPSPAD_MAX_SCRATCHPAD_BYTES: the new pad, as stored JSON, must fit. */
  maxBytes?: number;
}

export interface PadWriteResult {
  version: number;
  pad: Pad;
  counts: PadCounts;
  /** The cadence says a reorganization is due now. */
  reorganizeDue: boolean;
}

export function versionConflict(currentVersion: number, expected: number): AppError {
  return new AppError(
    'version_conflict',
    `The scratchpad is at version ${currentVersion}, not ${expected}: it changed since you read it. Read it again, reapply your change, and send expected_version ${currentVersion}.`,
    { current_version: currentVersion, expected_version: expected },
  );
}

/** Writes a new version of the conversation's pad in one transaction. */
export async function writePad(db: Database, scope: ConversationScope, write: PadWrite): Promise<PadWriteResult> {
  return db.transaction(async (tx) => {
    await ensureConversation(tx, scope, { lock: true });
    const rows = await tx.query<PadRow>(
      `SELECT ${PAD_COLUMNS} FROM scratchpad WHERE organization_id = $1 AND conversation_id = $2`,
      [scope.organizationId, scope.conversationId],
    );
    const current = rows[0] ? fromRow(rows[0]) : null;
    const currentVersion = current?.version ?? 0;
    if (
      write.expectedVersion !== undefined &&
      write.expectedVersion !== null &&
      write.expectedVersion !== currentVersion
    ) {
      throw versionConflict(currentVersion, write.expectedVersion);
    }
    const pad = write.build(current?.pad ?? emptyPad(), currentVersion);
    const json = JSON.stringify(pad);
    checkJsonTextBytes(
      'scratchpadBytes',
      'scratchpad',
      json,
      write.maxBytes ?? DEFAULT_SIZE_LIMITS.scratchpadBytes,
      PAD_TOO_LARGE_ADVICE,
    );
    const issues = [...entryCountIssues(pad), ...citationIssues(pad), ...recordRefIssues(pad)];
    if (issues.length === 0) {
      issues.push(...(await missingRecordRefs(tx, scope, pad)));
    }
    if (issues.length > 0) {
      throw invalidPad(issues);
    }
    const version = currentVersion + 1;
    const budget = write.reciteBudget ?? RECITE_MAX_CHARS_DEFAULT;
    const recited = recitePad(pad, version, budget);
    const recitation: StoredRecitation = {
      budget,
      text: recited.text,
      format: RECITATION_FORMAT,
      selection: recited.selection,
    };
    const settings = current?.settings ?? PAD_SETTINGS_DEFAULTS;
    const writes = write.isReorganization ? 0 : (current?.writesSinceReorganize ?? 0) + 1;
    const reorganizeDue =
      !write.isReorganization && settings.reorganize_every > 0 && writes >= settings.reorganize_every;
    await tx.query(
      `INSERT INTO scratchpad (conversation_id, organization_id, version, pad, writes_since_reorganize,
         reorganized_version, recitation, updated_at)
       VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7::jsonb, now())
       ON CONFLICT (organization_id, conversation_id) DO UPDATE SET
         version = excluded.version, pad = excluded.pad,
         writes_since_reorganize = excluded.writes_since_reorganize,
         reorganized_version = CASE WHEN $8 THEN excluded.version ELSE scratchpad.reorganized_version END,
         recitation = excluded.recitation, updated_at = now()`,
      [
        scope.conversationId,
        scope.organizationId,
        version,
        json,
        writes,
        write.isReorganization ? version : 0,
        JSON.stringify(recitation),
        write.isReorganization === true,
      ],
    );
    await tx.query(
      `INSERT INTO scratchpad_version (conversation_id, organization_id, version, pad, source, reason, metadata)
       VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7::jsonb)`,
      [
        scope.conversationId,
        scope.organizationId,
        version,
        json,
        write.source,
        write.reason,
        JSON.stringify(write.metadata ?? {}),
      ],
    );
    return { version, pad, counts: countsOfPad(pad), reorganizeDue };
  });
}

/** Updates the pad's settings (creating an empty pad at version 0 if none exists yet). */
export async function updatePadSettings(
  db: Database,
  scope: ConversationScope,
  settings: Partial<PadSettings>,
): Promise<PadSettings> {
  return db.transaction(async (tx) => {
    await ensureConversation(tx, scope, { lock: true });
    const rows = await tx.query<{ settings: Partial<PadSettings> }>(
      `INSERT INTO scratchpad (conversation_id, organization_id, version, pad, settings)
       VALUES ($1, $2, 0, $3::jsonb, $4::jsonb)
       ON CONFLICT (organization_id, conversation_id) DO UPDATE SET settings = scratchpad.settings || excluded.settings
       RETURNING settings`,
      [scope.conversationId, scope.organizationId, JSON.stringify(emptyPad()), JSON.stringify(settings)],
    );
    return { ...PAD_SETTINGS_DEFAULTS, ...rows[0]?.settings };
  });
}

/** Records that a reorganization examined `version` (so the sweep skips the pad until it changes). */
export async function markReorganized(db: Queryable, scope: ConversationScope, version: number): Promise<void> {
  await db.query(
    `UPDATE scratchpad SET reorganized_version = greatest(reorganized_version, $3)
     WHERE conversation_id = $1 AND organization_id = $2`,
    [scope.conversationId, scope.organizationId, version],
  );
}

export interface PadVersionSummary {
  version: number;
  source: string;
  reason: string;
  metadata: Record<string, unknown>;
  created_at: Date;
  counts: PadCounts;
}

/** Versions, newest first, before `beforeVersion` (keyset pages). */
export async function listPadVersions(
  db: Queryable,
  scope: ConversationScope,
  beforeVersion: number,
  limit: number,
): Promise<PadVersionSummary[]> {
  const rows = await db.query<
    Omit<PadVersionSummary, 'counts'> & { goals: number; open_items: number; facts: number; refs: number }
  >(
    `SELECT v.version, v.source, v.reason, v.metadata, v.created_at,
            jsonb_array_length(v.pad->'goals') AS goals, jsonb_array_length(v.pad->'open_items') AS open_items,
            jsonb_array_length(v.pad->'facts') AS facts, jsonb_array_length(v.pad->'refs') AS refs
     FROM scratchpad_version v
     WHERE v.conversation_id = $1 AND v.organization_id = $2 AND v.version < $3
     ORDER BY v.version DESC LIMIT $4`,
    [scope.conversationId, scope.organizationId, beforeVersion, limit],
  );
  return rows.map(({ goals, open_items, facts, refs, ...rest }) => ({
    ...rest,
    counts: { goals, open_items, facts, refs },
  }));
}

export { SCRATCHPAD_EVENT_STATUSES };
export type ScratchpadEventStatus = (typeof SCRATCHPAD_EVENT_STATUSES)[number];

export async function appendScratchpadEvent(
  db: Queryable,
  scope: ConversationScope,
  status: ScratchpadEventStatus,
  data: Record<string, unknown>,
): Promise<void> {
  await db.query(
    `INSERT INTO scratchpad_event (conversation_id, organization_id, kind, status, data)
     VALUES ($1, $2, 'reorganization', $3, $4::jsonb)`,
    [scope.conversationId, scope.organizationId, status, JSON.stringify(data)],
  );
}

export interface ScratchpadEvent {
  id: number;
  kind: string;
  status: ScratchpadEventStatus;
  data: Record<string, unknown>;
  created_at: Date;
}

export async function listScratchpadEvents(
  db: Queryable,
  scope: ConversationScope,
  afterId: number,
  limit: number,
): Promise<ScratchpadEvent[]> {
  return db.query<ScratchpadEvent>(
    `SELECT id::int AS id, kind, status, data, created_at FROM scratchpad_event
     WHERE conversation_id = $1 AND organization_id = $2 AND id > $3 ORDER BY id LIMIT $4`,
    [scope.conversationId, scope.organizationId, afterId, limit],
  );
}

/** Remembers what a context render told the assistant: pad version, size and hash. */
export async function recordContextRender(
  db: Queryable,
  scope: ConversationScope,
  render: { padVersion: number; chars: number; sha256: string },
): Promise<void> {
  await db.query(
    `INSERT INTO context_render (conversation_id, organization_id, pad_version, chars, sha256)
     VALUES ($1, $2, $3, $4, $5)`,
    [scope.conversationId, scope.organizationId, render.padVersion, render.chars, render.sha256],
  );
}

export async function listContextRenders(db: Queryable, scope: ConversationScope, limit: number) {
  return db.query<{ id: number; pad_version: number; chars: number; sha256: string; created_at: Date }>(
    `SELECT id::int AS id, pad_version, chars, sha256, created_at FROM context_render
     WHERE conversation_id = $1 AND organization_id = $2 ORDER BY id DESC LIMIT $3`,
    [scope.conversationId, scope.organizationId, limit],
  );
}

/**
 * Pads changed since their last reorganization, every organization, least recently changed
 * first: what the scheduled sweep hands out, `limit` at a time.
 */
export async function listPadsToReorganizeAllOrganizations(
  db: Queryable,
  limit: number,
): Promise<(ConversationScope & { version: number })[]> {
  const rows = await db.query<{ conversation_id: string; organization_id: string; version: number }>(
    `SELECT conversation_id, organization_id, version FROM scratchpad
     WHERE version > reorganized_version ORDER BY updated_at LIMIT $1`,
    [limit],
  );
  return rows.map((r) => ({
    conversationId: r.conversation_id,
    organizationId: r.organization_id,
    version: r.version,
  }));
}

/**
 * The pad's version and stored recitation, without reading the pad itself (which may hold
 * thousands of facts): what the context fragment needs on every turn.
 */
export async function getRecitation(
  db: Queryable,
  scope: ConversationScope,
): Promise<{ version: number; recitation: StoredRecitation | null }> {
  const rows = await db.query<{ version: number; recitation: StoredRecitation | null }>(
    'SELECT version, recitation FROM scratchpad WHERE conversation_id = $1 AND organization_id = $2',
    [scope.conversationId, scope.organizationId],
  );
  return rows[0] ?? { version: 0, recitation: null };
}
