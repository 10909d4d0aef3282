/**
 * The context fragment, paid on every turn of the assistant: its cost in o200k tokens for a
 * typical conversation (2 operations, 20 facts) and for one that has accumulated a lot (1,000
 * operations — one active, the rest paused, 30 items each, some in flight — and a pad of 2,000
 * facts, about 210 KB, near OPSPAD_MAX_SCRATCHPAD_BYTES), and the time to build the large one.
 * Both must stay cheap whatever they hold.
 */
import { randomUUID } from 'node:crypto';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { CONTEXT_MAX_TOKENS_DEFAULT } from '../../src/domain/context-compose.ts';
import { RECITE_MAX_CHARS_DEFAULT } from '../../src/domain/recitation.ts';
import { emptyPad, type Pad } from '../../src/domain/scratchpad.ts';
import { createOperation, ensureConversation, pauseOperation, writePad } from '../../src/store/index.ts';
import { buildContextFragment } from '../../src/tools/context-fragment.ts';
import { typicalPad } from '../../test/helpers/typical-context.ts';
import { type BenchContext, type Entry, median, round, timed } from '../lib/common.ts';

const ITEMS_PER_OPERATION = 30;
const BUDGETS = { reciteChars: RECITE_MAX_CHARS_DEFAULT, maxTokens: CONTEXT_MAX_TOKENS_DEFAULT };

/** Two operations through the store (one paused by an operator), 40/100 recorded, and the pad. */
async function typicalTokens(ctx: BenchContext, organizationId: string): Promise<{ tokens: number; chars: number }> {
  const scope = { organizationId, conversationId: randomUUID() };
  const ids = Array.from({ length: 100 }, (_, i) => `contact-${i}`);
  const make = (operationType: string) =>
    createOperation(ctx.db, scope, {
      operationType,
      itemIds: ids,
      batchSize: 10,
      queryParams: null,
      notes: null,
      execution: 'assistant',
      actor: 'bench',
    });
  const paused = (await make('update_contacts')).operation;
  await pauseOperation(ctx.db, scope, paused.id, {
    actor: 'operator:admin',
    reason: 'paused by operator admin',
    pausedBy: 'operator:admin',
  });
  const active = (await make('send_sms')).operation;
  await ctx.db.query(
    `UPDATE assistant_operation_item SET status = CASE WHEN ordinal < 38 THEN 'completed' ELSE 'failed' END
     WHERE operation_id = ANY($1::uuid[]) AND ordinal < 40`,
    [[paused.id, active.id]],
  );
  await ctx.db.query(
    `UPDATE assistant_operation SET completed_count = 38, failed_count = 2,
       state_json = state_json || '{"cursor": 40}'::jsonb
     WHERE id = ANY($1::uuid[])`,
    [[paused.id, active.id]],
  );
  const pad = typicalPad(active.id, paused.id);
  await writePad(ctx.db, scope, {
    build: () => pad,
    source: 'api',
    reason: 'bench',
    reciteBudget: BUDGETS.reciteChars,
  });
  const { text } = await buildContextFragment(ctx.db, scope, BUDGETS);
  return { tokens: countTokens(text), chars: text.length };
}

export async function benchContext(ctx: BenchContext, organizationId: string): Promise<Entry[]> {
  const typical = await typicalTokens(ctx, organizationId);
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
           || CASE WHEN g = $3 THEN '{}'::jsonb
              ELSE '{"paused_reason": "a new operation was created", "paused_by": "newer_operation"}'::jsonb END,
         now() - make_interval(secs => $3 - g), now() - make_interval(secs => $3 - g)
       FROM generate_series(1, $3) AS g`,
      [scope.conversationId, scope.organizationId, operations],
    );
    await tx.query(
      `INSERT INTO assistant_operation_item (operation_id, ordinal, item_id, status)
       SELECT o.id, i, 'contact-' || o.id || '-' || i,
         CASE WHEN i < o.completed_count + o.failed_count THEN 'completed' ELSE 'pending' END
       FROM assistant_operation o, generate_series(0, ${ITEMS_PER_OPERATION - 1}) AS i
       WHERE o.conversation_id = $1`,
      [scope.conversationId],
    );
    // Each operation's next 5 items leased as the assistant's batch: a lease row names them.
    await tx.query(
      `INSERT INTO assistant_operation_lease (operation_id, owner, ordinals, remaining, expires_at, max_ordinal)
       SELECT o.id, 'assistant',
         ARRAY(SELECT generate_series(o.completed_count + o.failed_count, o.completed_count + o.failed_count + 4)),
         5, now() + interval '1 hour', o.completed_count + o.failed_count + 4
       FROM assistant_operation o WHERE o.conversation_id = $1`,
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
    reciteBudget: BUDGETS.reciteChars,
  });

  for (let i = 0; i < 5; i++) {
    await buildContextFragment(ctx.db, scope, BUDGETS); // warm-up (and the tokenizer's first load)
  }
  const times: number[] = [];
  let text = '';
  for (let i = 0; i < ctx.plan.renderSamples; i++) {
    const { result, ms } = await timed(() => buildContextFragment(ctx.db, scope, BUDGETS));
    text = result.text;
    times.push(ms);
  }
  const value = median(times);
  const maxTokens = countTokens(text);
  ctx.log(
    `context fragment, ${operations} operations and ${ctx.plan.contextFacts} facts: ${round(value, 2)} ms, ${text.length} characters, ${maxTokens} tokens; typical: ${typical.tokens} tokens`,
  );
  const sizes = `${operations} operations, ${ctx.plan.contextFacts} facts`;
  return [
    {
      name: 'context_render_ms',
      value: round(value, 2),
      unit: 'ms',
      n: times.length,
      note: `median; ${sizes} → ${text.length} characters`,
    },
    { name: 'context_render_chars', value: text.length, unit: 'chars', note: `length of the fragment (${sizes})` },
    {
      name: 'context_tokens_typical',
      value: typical.tokens,
      unit: 'tokens',
      note: `o200k (gpt-tokenizer); 2 operations (one paused by an operator), 20 facts citing them → ${typical.chars} characters`,
    },
    {
      name: 'context_tokens_max',
      value: maxTokens,
      unit: 'tokens',
      note: `o200k (gpt-tokenizer); ${sizes}; OPSPAD_CONTEXT_MAX_TOKENS ${BUDGETS.maxTokens}`,
    },
  ];
}
