/**
 * The context fragment of a conversation that has accumulated a lot: 1,000 operations (one
 * active, the rest paused, 30 items each, some in flight) and a pad of 2,000 facts (about 210 KB,
 * near OPSPAD_MAX_SCRATCHPAD_BYTES). The fragment is rebuilt on every turn of the assistant, so
 * it must stay cheap whatever it holds.
 */
import { randomUUID } from 'node:crypto';
import { RECITE_MAX_CHARS_DEFAULT } from '../../src/domain/recitation.ts';
import { emptyPad, type Pad } from '../../src/domain/scratchpad.ts';
import { ensureConversation, writePad } from '../../src/store/index.ts';
import { buildContextFragment } from '../../src/tools/context-fragment.ts';
import { type BenchContext, type Entry, median, round, timed } from '../lib/common.ts';

const ITEMS_PER_OPERATION = 30;

export async function benchContext(ctx: BenchContext, organizationId: string): Promise<Entry[]> {
  const scope = { organizationId, conversationId: randomUUID() };
  const operations = ctx.plan.contextOperations;
  await ctx.db.transaction(async (tx) => {
    await ensureConversation(tx, scope, { lock: true });
    // The newest is active; every earlier one was paused when the next was created.
    await tx.query(
      `INSERT INTO assistant_operation
         (conversation_id, organization_id, operation_type, status, total_items, completed_count, failed_count,
          state_json, created_at, updated_at)
       SELECT $1, $2, 'send_sms', CASE WHEN g = $3 THEN 'active' ELSE 'paused' END, ${ITEMS_PER_OPERATION},
         g % 20, g % 3,
         jsonb_build_object('cursor', g % 20 + g % 3, 'batch_size', 5, 'execution', 'assistant',
           'query_params', jsonb_build_object('tag', 'Lead', 'segment', g), 'notes', 'follow-up ' || g,
           'abandoned_count', 0, 'max_parallel_batches', 4, 'max_failure_rate', null)
           || CASE WHEN g = $3 THEN '{}'::jsonb ELSE '{"paused_reason": "a new operation was created"}'::jsonb END,
         now() - make_interval(secs => $3 - g), now() - make_interval(secs => $3 - g)
       FROM generate_series(1, $3) AS g`,
      [scope.conversationId, scope.organizationId, operations],
    );
    await tx.query(
      `INSERT INTO assistant_operation_item (operation_id, ordinal, item_id, status, lease_owner, lease_expires_at)
       SELECT o.id, i, 'contact-' || o.id || '-' || i,
         CASE WHEN i < o.completed_count + o.failed_count THEN 'completed'
              WHEN i < o.completed_count + o.failed_count + 5 THEN 'leased' ELSE 'pending' END,
         CASE WHEN i >= o.completed_count + o.failed_count AND i < o.completed_count + o.failed_count + 5
              THEN 'assistant' END,
         CASE WHEN i >= o.completed_count + o.failed_count AND i < o.completed_count + o.failed_count + 5
              THEN now() + interval '1 hour' END
       FROM assistant_operation o, generate_series(0, ${ITEMS_PER_OPERATION - 1}) AS i
       WHERE o.conversation_id = $1`,
      [scope.conversationId],
    );
  });
  const refs = Array.from({ length: 100 }, (_, i) => ({
    id: `crm:search-${i}`,
    kind: 'tool_call',
    label: `search ${i}`,
  }));
  const pad: Pad = {
    ...emptyPad(),
    goals: [{ text: 'Send a follow-up SMS to every contact tagged Lead', source_ref: null }],
    open_items: Array.from({ length: 50 }, (_, i) => ({ text: `check the reply of contact ${i}`, source_ref: null })),
    facts: Array.from({ length: ctx.plan.contextFacts }, (_, i) => ({
      text: `contact-${String(i).padStart(8, '0')} prefers SMS after 6 pm and has ${i % 7} open deals`,
      source_ref: `crm:search-${i % 100}`,
    })),
    refs,
  };
  await writePad(ctx.db, scope, {
    build: () => pad,
    source: 'api',
    reason: 'bench',
    reciteBudget: RECITE_MAX_CHARS_DEFAULT,
  });

  for (let i = 0; i < 5; i++) {
    await buildContextFragment(ctx.db, scope, RECITE_MAX_CHARS_DEFAULT); // warm-up
  }
  const times: number[] = [];
  let chars = 0;
  for (let i = 0; i < ctx.plan.renderSamples; i++) {
    const { result, ms } = await timed(() => buildContextFragment(ctx.db, scope, RECITE_MAX_CHARS_DEFAULT));
    chars = result.text.length;
    times.push(ms);
  }
  const value = median(times);
  ctx.log(
    `context fragment, ${operations} operations and ${ctx.plan.contextFacts} facts: ${round(value, 2)} ms, ${chars} characters`,
  );
  return [
    {
      name: 'context_render_ms',
      value: round(value, 2),
      unit: 'ms',
      n: times.length,
      note: `median; ${operations} operations, ${ctx.plan.contextFacts} facts → ${chars} characters`,
    },
    { name: 'context_render_chars', value: chars, unit: 'chars', note: 'length of the rendered fragment' },
  ];
}
