/**
 * The context fragment priced in o200k tokens (gpt-tokenizer): a typical conversation (2
 * operations, 20 facts) costs at most 400; any conversation (1,000 operations, 10,000 facts)
 * stays within the budget; every operation id and ref is spelled once; lines are never cut; the
 * active operation comes first; who paused an operation is said, an operator's pause asks the
 * user first; and the text is byte-stable while nothing changes.
 */
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { describe, expect, it } from 'vitest';
import { typicalPad } from '../../test/helpers/typical-context.ts';
import { CONTEXT_MAX_TOKENS_DEFAULT, composeContext } from './context-compose.ts';
import type { OpenOperation } from './context-render.ts';
import type { OperationStatus } from './operation.ts';
import { recitePad } from './recitation.ts';
import { normalizePad, type Pad } from './scratchpad.ts';

const LONG_NOTES = `${'Follow up with every lead tagged Q2, mention the webinar and the discount code. '.repeat(40)}\n\nEnd.`;

function operation(index: number, overrides: Partial<OpenOperation> = {}, notes: string | null = null): OpenOperation {
  return {
    id: `00000000-0000-4000-8000-${String(index).padStart(12, '0')}`,
    conversation_id: '11111111-1111-4111-8111-111111111111',
    organization_id: '22222222-2222-4222-8222-222222222222',
    operation_type: `send_sms_${index}`,
    status: 'paused',
    total_items: 100,
    completed_count: 38,
    failed_count: 2,
    state_json: {
      cursor: 45,
      batch_size: 5,
      execution: 'assistant',
      notes,
      abandoned_count: 0,
      paused_reason: 'a new operation was created',
      paused_by: 'newer_operation',
    },
    created_at: new Date('2024-01-01T00:00:00Z'),
    updated_at: new Date('2024-01-01T00:00:00Z'),
    in_flight_count: 0,
    ...overrides,
  };
}

function withState(op: OpenOperation, state: Partial<OpenOperation['state_json']>): OpenOperation {
  return { ...op, state_json: { ...op.state_json, ...state } };
}

/** One active operation followed by `count - 1` paused ones, each with long notes. */
function conversationWith(count: number): OpenOperation[] {
  return Array.from({ length: count }, (_, i) =>
    operation(i, i === 0 ? { status: 'active' as OperationStatus, in_flight_count: 5 } : {}, LONG_NOTES),
  );
}

function bigPad(facts: number): Pad {
  return normalizePad(
    {
      refs: Array.from({ length: 100 }, (_, i) => ({ id: `crm:search-${i}`, kind: 'tool_call', label: `search ${i}` })),
      open_items: Array.from({ length: 50 }, (_, i) => ({ text: `check the reply of contact ${i}` })),
      facts: Array.from({ length: facts }, (_, i) => ({
        text: `contact-${String(i).padStart(8, '0')} prefers SMS after 6 pm and has ${i % 7} open deals`,
        source_ref: `crm:search-${i % 100}`,
      })),
    },
    'Send a follow-up SMS to every contact tagged Lead',
  );
}

const compose = (input: Partial<Parameters<typeof composeContext>[0]> & { operations: OpenOperation[] }) =>
  composeContext({
    total: input.operations.length,
    recitation: null,
    budgetTokens: CONTEXT_MAX_TOKENS_DEFAULT,
    count: countTokens,
    ...input,
  });

describe('the context fragment in tokens', () => {
  it('is empty when there is no open operation and no pad', () => {
    expect(compose({ operations: [] })).toEqual({ text: '', tokens: 0, operations: [], other_operations: [] });
  });

  it('costs at most 400 tokens for 2 operations and 20 facts, each id spelled once', () => {
    // Random-looking ids, as gen_random_uuid() makes them: 35 tokens each (all zeros cost fewer).
    const active = operation(1, {
      id: '3f2a1b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b',
      status: 'active',
      operation_type: 'send_sms',
    });
    const paused = withState(
      operation(2, { id: '9b1c2d3e-4f50-4a6b-8c7d-8e9fa0b1c2d3', operation_type: 'update_contacts' }),
      {
        paused_by: 'operator:alice',
        paused_reason: 'paused by operator alice',
      },
    );
    const pad = typicalPad(active.id, paused.id);
    const { text, tokens, operations } = compose({
      operations: [paused, active],
      recitation: recitePad(pad, 3, 4000).selection,
    });
    expect(countTokens(text)).toBeLessThanOrEqual(400);
    expect(tokens).toBeGreaterThanOrEqual(countTokens(text));
    expect(operations.map((op) => [op.alias, op.operation_id])).toEqual([
      ['#1', active.id],
      ['#2', paused.id],
    ]);
    // Each 36-character id (35 tokens) once: in its operation's entry, never in the facts.
    expect(text.split(active.id)).toHaveLength(2);
    expect(text.split(paused.id)).toHaveLength(2);
    expect(text).toContain('Scratchpad v3 (in ref ids, #n = the id of operation #n):');
    expect(text).toContain('Facts from #1:');
    expect(text).toContain('Facts from #2:');
    expect(text.split('\n').filter((line) => line.startsWith('- contact-'))).toHaveLength(20);
  });

  it.each([300, 800, CONTEXT_MAX_TOKENS_DEFAULT, 4000])(
    'keeps 1,000 operations and 10,000 facts within a budget of %i tokens, cutting no line',
    (budget) => {
      const operations = conversationWith(50);
      const pad = bigPad(10_000);
      const {
        text,
        tokens,
        operations: shown,
      } = compose({
        operations,
        total: 1000,
        recitation: recitePad(pad, 9, 10_000).selection,
        budgetTokens: budget,
      });
      expect(countTokens(text)).toBeLessThanOrEqual(budget);
      expect(tokens).toBeLessThanOrEqual(budget);
      expect(tokens).toBeGreaterThanOrEqual(countTokens(text));
      // The active operation first; the rest counted; the newest facts kept, the older counted.
      expect(shown[0]).toMatchObject({ alias: '#1', status: 'active', operation_id: operations[0]?.id });
      expect(text).toMatch(new RegExp(`- …and ${1000 - shown.length} more open operations not shown: `));
      for (const line of text.split('\n')) {
        expect(/^(Operations \(|Scratchpad v9|Goals:|Open items:|Facts|- | {2}Notes: )/.test(line), line).toBe(true);
      }
      if (budget >= CONTEXT_MAX_TOKENS_DEFAULT) {
        expect(text).toContain('contact-00009999 prefers SMS');
        expect(text).toMatch(/Facts:\n- …\d+ older facts not shown/);
      }
    },
  );

  it('shows an operator’s pause as the operator’s, telling the model to ask the user first', () => {
    const paused = withState(operation(1), { paused_by: 'operator:alice', paused_reason: 'paused by operator alice' });
    const { text, operations } = compose({ operations: [paused] });
    expect(text).toContain(
      `- #1 PAUSED send_sms_1, 40/100 done (2 failed), id ${paused.id}: paused by operator alice: ask the user before resume.`,
    );
    expect(text).not.toContain('paused by you');
    expect(operations[0]?.paused_by).toEqual({ kind: 'operator', name: 'alice' });
  });

  it('says who else paused: the assistant, the circuit breaker, a newer operation', () => {
    const mine = withState(operation(1), { paused_by: 'assistant', paused_reason: 'paused by the assistant' });
    const breaker = withState(operation(2), {
      paused_by: 'circuit_breaker',
      paused_reason:
        'circuit breaker: 26 of the last 50 items failed (max_failure_rate 0.5); check the failures with {"action":"get"}, fix the cause, then resume',
    });
    const newer = operation(3);
    const legacy = withState(operation(4), { paused_by: undefined });
    const { text, operations } = compose({
      operations: [mine, breaker, newer, legacy],
      pausedBy: new Map([[legacy.id, 'operator:bob']]),
    });
    expect(text).toContain(`id ${mine.id}: paused by you; resume to continue.`);
    expect(text).toContain(
      `id ${breaker.id}: paused by the circuit breaker (26 of the last 50 items failed): get the failures, fix the cause, then resume.`,
    );
    expect(text).toContain(`id ${newer.id}: paused by a newer operation; resume to continue.`);
    expect(text).toContain(`id ${legacy.id}: paused by operator bob: ask the user before resume.`);
    expect(operations.map((op) => op.paused_by?.kind)).toEqual([
      'assistant',
      'circuit_breaker',
      'newer_operation',
      'operator',
    ]);
  });

  it('names the next action of an active operation: progress, complete, or get for a background one', () => {
    const todo = operation(1, { status: 'active' });
    const done = operation(2, { status: 'active', completed_count: 100, failed_count: 0 });
    const background = withState(operation(3, { status: 'active', in_flight_count: 8 }), { execution: 'background' });
    expect(compose({ operations: [todo] }).text).toContain(`id ${todo.id}: progress, do the batch, update.`);
    expect(compose({ operations: [done] }).text).toContain(
      `100/100 done, id ${done.id}: every item is recorded: complete.`,
    );
    expect(compose({ operations: [background] }).text).toContain(
      `40/100 done (2 failed, 8 in flight), id ${background.id}: workers run it; get to check on it.`,
    );
  });

  it('keeps notes on one line, cut with an ellipsis', () => {
    const { text } = compose({
      operations: [operation(1, {}, 'line one\nline two\r\n\tline three'), operation(2, {}, LONG_NOTES)],
    });
    expect(text).toContain('  Notes: line one line two line three\n');
    const long = text.split('\n').find((line) => line.startsWith('  Notes: Follow'));
    expect(long?.endsWith('…')).toBe(true);
    expect(long?.length).toBeLessThanOrEqual('  Notes: '.length + 120);
  });

  it('lists the operations of other conversations after the conversation’s own, within the same budget', () => {
    const own = operation(1, { status: 'active' });
    const elsewhere = operation(2, { status: 'active', conversation_id: '33333333-3333-4333-8333-333333333333' });
    const { text, other_operations } = compose({
      operations: [own],
      others: { operations: [elsewhere], total: 1 },
    });
    expect(text.split('\n')).toEqual([
      'Operations (manage_assistant_operation: call the action named with the operation_id):',
      `- #1 ACTIVE send_sms_1, 40/100 done (2 failed), id ${own.id}: progress, do the batch, update.`,
      'Operations of other conversations (the same calls, always with the operation_id):',
      `- #2 ACTIVE send_sms_2, 40/100 done (2 failed), id ${elsewhere.id}: progress, do the batch, update.`,
    ]);
    expect(other_operations).toEqual([
      expect.objectContaining({ alias: '#2', operation_id: elsewhere.id, conversation_id: elsewhere.conversation_id }),
    ]);
  });

  it('names the tool and the call when only other conversations have operations (a fresh session)', () => {
    const elsewhere = operation(2, { status: 'active', conversation_id: '33333333-3333-4333-8333-333333333333' });
    const { text } = compose({ operations: [], total: 0, others: { operations: [elsewhere], total: 1 } });
    expect(text.split('\n')).toEqual([
      'Operations of other conversations (manage_assistant_operation: call the action named with the operation_id):',
      `- #1 ACTIVE send_sms_2, 40/100 done (2 failed), id ${elsewhere.id}: progress, do the batch, update.`,
    ]);
    expect(text).not.toContain('the same calls');
  });

  it('is byte-stable while nothing changes, whatever the order the operations come in', () => {
    const operations = [operation(1, { status: 'active' }), operation(2), operation(3)];
    const recitation = recitePad(bigPad(300), 4, 4000).selection;
    const first = compose({ operations, recitation });
    const again = compose({
      operations: [operations[0], operations[1], operations[2]].map((op) => structuredClone(op) as OpenOperation),
      recitation: structuredClone(recitation),
    });
    expect(again.text).toBe(first.text);
    // Only the work changes it: one more item recorded changes one line.
    const moved = compose({
      operations: [
        { ...(operations[0] as OpenOperation), completed_count: 39 },
        operations[1],
        operations[2],
      ] as OpenOperation[],
      recitation,
    });
    const changed = moved.text.split('\n').filter((line, i) => line !== first.text.split('\n')[i]);
    expect(changed).toHaveLength(1);
  });
});
