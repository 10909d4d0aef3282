/**
 * The structured scratchpad of each conversation: reading and writing the current pad, its
 * settings and its recitation. Earlier versions and context renders are read in
 * scratchpad-history.ts; the reorganization sweep's statements are in scratchpad-reorganization.ts.
 *
 * Writes lock the conversation row first, so writers of one pad queue up; each write compares
 * the version it was based on (optimistic concurrency) and appends a version row in the same
 * transaction. The recitation is rendered once per version and stored with it.
 */
import { AppError } from '../../domain/errors.ts';
import {
  RECITATION_FORMAT,
  RECITE_MAX_CHARS_DEFAULT,
  type RecitationSelection,
  recitePad,
} from '../../domain/recitation.ts';
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
} from '../../domain/scratchpad.ts';
import { PAD_TOO_LARGE_ADVICE } from '../../domain/scratchpad-input.ts';
import { checkJsonTextBytes, DEFAULT_SIZE_LIMITS } from '../../domain/size-limits.ts';
import type { Database, Queryable } from '../db/db.ts';
import { type ConversationScope, ensureConversation } from '../tenants/conversation-repo.ts';

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
  const found = await tx.query<{ id: string; items_pruned: boolean }>(
    `SELECT id, state_json ?| array['items_pruned_at', 'items_pruned_through'] AS items_pruned
     FROM assistant_operation WHERE id = ANY($1::uuid[]) AND conversation_id = $2 AND organization_id = $3`,
    [operationIds, scope.conversationId, scope.organizationId],
  );
  const existing = new Set(found.map((r) => r.id));
  // Retention deleted these operations' item rows: their items cannot be checked any more, and a
  // pad citing one must stay writable (and reorganizable), so such refs are taken as they are.
  const pruned = new Set(found.filter((r) => r.items_pruned).map((r) => r.id));
  const itemTargets = targets.flatMap((t) =>
    t.target?.kind === 'item' && existing.has(t.target.operationId) && !pruned.has(t.target.operationId)
      ? [{ ...t.target, index: t.index }]
      : [],
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
    } else if (
      target.kind === 'item' &&
      !pruned.has(target.operationId) &&
      !existingItems.has(`${target.operationId}:${target.itemId}`)
    ) {
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
