/**
 * Retention of everything besides item rows, each by its own limit, on a database of this
 * file's own (retention is global): traces (an ended execution's with it, the conversation's by
 * age; a running execution's never), context renders and reorganization events by age, and the
 * newest versions of each pad. And the steps themselves: a run cut short keeps its progress and
 * the next one resumes there, with no step larger than OPSPAD_RETENTION_BATCH.
 *
 * Time is moved by backdating rows; a pass is the reconciler's `runOnce`.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.ts';
import { retentionPolicy } from '../../src/config/retention.ts';
import { TracesPage } from '../../src/domain/conversation-output.ts';
import type { ReconcileReport } from '../../src/queue/reconciler.ts';
import { runRetention } from '../../src/store/retention/retention.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { type PrivateDatabase, privatePostgresDatabase } from '../helpers/private-database.ts';

const ENV = {
  OPSPAD_RETENTION: '1h',
  OPSPAD_RETENTION_RENDERS: '30m',
  OPSPAD_RETENTION_PAD_VERSIONS: '3',
  OPSPAD_RETENTION_BATCH: '50',
  OPSPAD_RECONCILE_INTERVAL: '1h',
};

describe('retention limits of traces, renders, events and pad versions (postgres)', () => {
  let database: PrivateDatabase;
  let harness: Harness;
  let tenant: Tenant;

  beforeAll(async () => {
    database = await privatePostgresDatabase('retention_limits');
    harness = await startHarness('postgres', { databaseUrl: database.url, workers: true, env: ENV });
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    await harness?.close();
    await database?.drop();
  });

  const pass = async () => {
    const report = await harness.service.reconciler?.runOnce();
    expect(report?.retention).toBeDefined();
    return report?.retention as NonNullable<ReconcileReport['retention']>;
  };
  const write = (conversation: string, notes: string, executionId?: string) =>
    tenant.tool(
      conversation,
      { notes },
      'write_to_scratchpad',
      executionId ? { 'x-opspad-execution': executionId } : {},
    );
  const startExecution = async (conversation: string) =>
    (await tenant.post(`/v1/conversations/${conversation}/executions`)).body.execution_id as string;
  const traces = (executionId: string) =>
    tenant.get<{ traces: { seq: number; notes?: string }[]; traces_pruned_at?: string }>(
      `/v1/executions/${executionId}/traces`,
    );

  it('deletes an ended execution’s traces with it, old conversation traces by age, and never a running execution’s', async () => {
    const conversation = randomUUID();
    const ended = await startExecution(conversation);
    const running = await startExecution(conversation);
    for (const note of ['plan', 'step 1', 'step 2']) {
      expect((await write(conversation, note, ended)).status).toBe(200);
      expect((await write(conversation, `${note} (running)`, running)).status).toBe(200);
    }
    for (const note of ['c1', 'c2', 'c3', 'c4']) {
      expect((await write(conversation, note)).status).toBe(200);
    }
    expect((await tenant.post(`/v1/executions/${ended}/end`)).status).toBe(200);
    await harness.db.query(`UPDATE assistant_execution SET ended_at = now() - interval '2 hours' WHERE id = $1`, [
      ended,
    ]);
    // Every trace of the running execution, and the conversation's first two, older than the limit.
    await harness.db.query(
      `UPDATE scratchpad_trace SET at = now() - interval '2 hours'
       WHERE execution_id = $1 OR (conversation_id = $2 AND execution_id IS NULL AND notes IN ('c1', 'c2'))`,
      [running, conversation],
    );

    const report = await pass();

    expect(report.pruned.scratchpad_trace).toBe(3 + 2);
    const endedTraces = await traces(ended);
    expect(endedTraces.body.traces).toEqual([]);
    expect(Date.parse(endedTraces.body.traces_pruned_at as string)).not.toBeNaN();
    expect(TracesPage.safeParse(endedTraces.body).error).toBeUndefined();
    const runningTraces = await traces(running);
    expect(runningTraces.body.traces.map((t) => [t.seq, t.notes])).toEqual([
      [1, 'plan (running)'],
      [2, 'step 1 (running)'],
      [3, 'step 2 (running)'],
    ]);
    expect(runningTraces.body).not.toHaveProperty('traces_pruned_at');
    const left = await harness.db.query<{ notes: string }>(
      'SELECT notes FROM scratchpad_trace WHERE conversation_id = $1 AND execution_id IS NULL ORDER BY id',
      [conversation],
    );
    expect(left.map((r) => r.notes)).toEqual(['c3', 'c4']);
  });

  it('deletes context renders past OPSPAD_RETENTION_RENDERS and reorganization events past their limit, newest kept', async () => {
    const conversation = randomUUID();
    expect((await tenant.tool(conversation, { task: 'Clean the CRM' }, 'update_scratchpad')).status).toBe(200);
    for (let i = 0; i < 4; i++) {
      expect((await tenant.context(conversation)).status).toBe(200);
    }
    for (let i = 0; i < 3; i++) {
      const reorganized = await tenant.post(`/v1/conversations/${conversation}/scratchpad/reorganize`, {});
      expect(reorganized.status, JSON.stringify(reorganized.body)).toBe(200);
    }
    const renderIds = await harness.db.query<{ id: number }>(
      'SELECT id::int AS id FROM context_render WHERE conversation_id = $1 ORDER BY id',
      [conversation],
    );
    // The first two renders are 45 minutes old (past 30m), the others new. The first event is
    // 90 minutes old (past OPSPAD_RETENTION, which events follow), the second 45 (within it).
    await harness.db.query(
      `UPDATE context_render SET created_at = now() - interval '45 minutes' WHERE id = ANY($1::bigint[])`,
      [renderIds.slice(0, 2).map((r) => r.id)],
    );
    const eventIds = await harness.db.query<{ id: number }>(
      'SELECT id::int AS id FROM scratchpad_event WHERE conversation_id = $1 ORDER BY id',
      [conversation],
    );
    expect(eventIds).toHaveLength(3);
    await harness.db.query(`UPDATE scratchpad_event SET created_at = now() - interval '90 minutes' WHERE id = $1`, [
      eventIds[0]?.id,
    ]);
    await harness.db.query(`UPDATE scratchpad_event SET created_at = now() - interval '45 minutes' WHERE id = $1`, [
      eventIds[1]?.id,
    ]);

    const report = await pass();

    expect(report.pruned.context_render).toBe(2);
    expect(report.pruned.scratchpad_event).toBe(1);
    const renders = await tenant.get<{ renders: { id: number }[] }>(
      `/v1/conversations/${conversation}/context-renders`,
    );
    expect(renders.body.renders.map((r) => r.id)).toEqual(
      renderIds
        .slice(2)
        .map((r) => r.id)
        .reverse(),
    );
    const events = await tenant.get<{ events: { id: number }[] }>(
      `/v1/conversations/${conversation}/scratchpad/events`,
    );
    expect(events.body.events.map((e) => e.id)).toEqual(eventIds.slice(1).map((e) => e.id));
  });

  it('keeps the newest OPSPAD_RETENTION_PAD_VERSIONS versions of each pad, and the pad writable', async () => {
    const conversation = randomUUID();
    // No reorganization in between (they make versions of their own, in the background).
    const settings = await harness.request(`/v1/conversations/${conversation}/scratchpad/settings`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ reorganize_every: 0 }),
    });
    expect(settings.status, JSON.stringify(settings.body)).toBe(200);
    expect((await tenant.tool(conversation, { task: 'Clean the CRM' }, 'update_scratchpad')).status).toBe(200);
    for (let i = 2; i <= 8; i++) {
      const written = await tenant.tool(
        conversation,
        { add: { open_items: [{ text: `check list ${i}` }] } },
        'update_scratchpad',
      );
      expect(written.status).toBe(200);
    }
    const versions = async () =>
      (
        await tenant.get<{ versions: { version: number }[] }>(`/v1/conversations/${conversation}/scratchpad/versions`)
      ).body.versions.map((v) => v.version);
    expect(await versions()).toEqual([8, 7, 6, 5, 4, 3, 2, 1]);

    const report = await pass();

    expect(report.pruned.scratchpad_version).toBe(5);
    expect(await versions()).toEqual([8, 7, 6]);
    const next = await tenant.tool(conversation, { add: { open_items: [{ text: 'one more' }] } }, 'update_scratchpad');
    expect(next.status).toBe(200);
    await pass();
    expect(await versions()).toEqual([9, 8, 7]);
    const pad = await tenant.get<{ scratchpad: { version: number; open_items: unknown[] } }>(
      `/v1/conversations/${conversation}/scratchpad`,
    );
    expect(pad.body.scratchpad).toMatchObject({ version: 9 });
    expect(pad.body.scratchpad.open_items).toHaveLength(8);
  });

  it('works in steps of at most OPSPAD_RETENTION_BATCH rows; a run cut short resumes where it stopped', async () => {
    const conversation = randomUUID();
    const itemIds = ids(1000);
    // Every tenth item fails (100 failures); 15 are kept, all within the first 300 items, so the
    // run cut short after 300 has moved them all and the resumed run must keep no more.
    const failed = itemIds.filter((_, i) => i % 10 === 9);
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'manual',
      total_items: 1000,
      item_ids: itemIds,
    });
    const operationId = created.body.operation_id as string;
    await tenant.op(conversation, {
      action: 'update',
      operation_id: operationId,
      completed_ids: itemIds.filter((_, i) => i % 10 !== 9),
      failed: failed.map((id) => ({ id, reason: 'no phone' })),
    });
    await tenant.op(conversation, { action: 'complete', operation_id: operationId });
    await harness.db.query(`UPDATE assistant_operation SET updated_at = now() - interval '2 hours' WHERE id = $1`, [
      operationId,
    ]);
    const count = async (table: string) =>
      (
        await harness.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE operation_id = $1`, [
          operationId,
        ])
      )[0]?.n;
    const rows = () => count('assistant_operation_item');
    const kept = () => count('assistant_operation_kept_failure');
    const policy = retentionPolicy(
      loadConfig({ ...ENV, OPSPAD_RETENTION_BATCH: '100', OPSPAD_RETENTION_FAILURES: '15' }),
    );

    // Stopped (as on shutdown) after its third step: 300 rows gone from the item table (15 of them
    // failures moved to the kept ones: 10 in the first 100 rows, 5 in the next), the progress kept.
    const stop = new AbortController();
    const steps: number[] = [];
    const first = await runRetention(harness.db, {
      policy,
      signal: stop.signal,
      onPruned: (table, n) => {
        if (table === 'assistant_operation_item') {
          steps.push(n);
          if (steps.length === 3) {
            stop.abort();
          }
        }
      },
    });
    expect(first.caughtUp).toBe(false);
    expect(steps).toEqual([90, 95, 100]);
    expect(await rows()).toBe(700);
    expect(await kept()).toBe(15);
    const midway = await tenant.op(conversation, { action: 'get', operation_id: operationId });
    expect(midway.body).toMatchObject({ completed_count: 900, items_pruned: { at: null } });

    const second = await runRetention(harness.db, {
      policy,
      onPruned: (table, n) => {
        if (table === 'assistant_operation_item') {
          steps.push(n);
        }
      },
    });
    expect(second.caughtUp).toBe(true);
    expect(steps).toEqual([90, 95, ...Array(8).fill(100)]);
    expect(await rows()).toBe(0);
    expect(await kept()).toBe(15);
    const done = await tenant.op(conversation, { action: 'get', operation_id: operationId });
    expect(done.body).toMatchObject({
      completed_count: 900,
      failed_count: 100,
      items_pruned: {
        failures_kept: 15,
        failures_pruned: 85,
        pruned_failure_reasons: [{ reason: 'no phone', count: 85 }],
      },
    });
    // The kept failures are still the operation's failures page, in item order.
    expect((done.body.failures as { id: string }[]).map((f) => f.id)).toEqual(failed.slice(0, 15));
    expect(Date.parse((done.body.items_pruned as { at: string }).at)).not.toBeNaN();
  });
});
