/**
 * The operations block of the context fragment stays within its hard character budget whatever
 * the number of operations or the length of their notes; whatever does not fit is summarized by
 * an overflow line that counts it; lines are never cut; the active operation comes first.
 */
import { describe, expect, it } from 'vitest';
import { OPERATIONS_BUDGET_CHARS, renderOperations } from './context-render.ts';
import type { OperationRecord, OperationStatus } from './operation.ts';

type RenderInput = OperationRecord & { in_flight_count: number };

const LONG_NOTES = `${'Follow up with every lead tagged Q2, mention the webinar and the discount code. '.repeat(40)}\n\nEnd.`;

function operation(
  index: number,
  overrides: Partial<RenderInput> = {},
  notes: string | null = LONG_NOTES,
): RenderInput {
  return {
    id: `00000000-0000-4000-8000-${String(index).padStart(12, '0')}`,
    conversation_id: '11111111-1111-4111-8111-111111111111',
    organization_id: '22222222-2222-4222-8222-222222222222',
    operation_type: `send_sms_${index}`,
    status: 'paused',
    total_items: 100,
    completed_count: 40,
    failed_count: 2,
    state_json: {
      cursor: 45,
      batch_size: 5,
      execution: 'assistant',
      query_params: null,
      notes,
      abandoned_count: 0,
      paused_reason: 'a new operation was created',
    },
    created_at: new Date('2024-01-01T00:00:00Z'),
    updated_at: new Date('2024-01-01T00:00:00Z'),
    in_flight_count: 0,
    ...overrides,
  };
}

/** One active operation followed by `count - 1` paused ones, each with long notes. */
function conversationWith(count: number): RenderInput[] {
  return Array.from({ length: count }, (_, i) =>
    operation(i, i === 0 ? { status: 'active' as OperationStatus, in_flight_count: 5 } : {}),
  );
}

const HIDDEN = /^- …and (\d+) more paused operations? not shown; /;

function hiddenCount(text: string): number {
  const last = text.split('\n').at(-1) ?? '';
  const match = HIDDEN.exec(last);
  return match ? Number(match[1]) : 0;
}

describe('renderOperations', () => {
  it('is empty when the conversation has no open operation', () => {
    expect(renderOperations([], 0)).toEqual({ text: '', shown: [] });
  });

  it.each([1, 10, 1000])('keeps %i operations with long notes within the 2000-character budget', (count) => {
    const operations = conversationWith(count);
    const { text, shown } = renderOperations(operations, count);

    expect(OPERATIONS_BUDGET_CHARS).toBe(2000);
    expect(text.length).toBeLessThanOrEqual(2000);
    expect(shown.length).toBeGreaterThanOrEqual(1);
    // Every operation is either shown or counted in the overflow line.
    expect(shown.length + hiddenCount(text)).toBe(count);
    if (shown.length < count) {
      expect(text.split('\n').at(-1)).toMatch(HIDDEN);
    } else {
      expect(text).not.toMatch(/more paused operation/);
    }
  });

  it('shows a single operation whole, with a one-line preview of its notes', () => {
    const { text, shown } = renderOperations(conversationWith(1), 1);
    expect(shown).toHaveLength(1);
    const lines = text.split('\n');
    expect(lines[0]).toBe('## Bulk operations (manage_assistant_operation)');
    expect(lines[1]).toContain(
      'ACTIVE send_sms_0 (operation_id 00000000-0000-4000-8000-000000000000): 42/100 recorded, 40 completed, 2 failed, 58 remaining, 5 in flight.',
    );
    const notes = lines.find((line) => line.startsWith('  Notes: '));
    expect(notes).toBeDefined();
    expect(notes?.length).toBeLessThanOrEqual('  Notes: '.length + 160);
    expect(notes?.endsWith('…')).toBe(true);
  });

  it('counts operations the caller did not load in the overflow line', () => {
    // The fragment loads at most 50 operations, but the conversation may hold many more.
    const { text, shown } = renderOperations(conversationWith(50), 1000);
    expect(text.length).toBeLessThanOrEqual(2000);
    expect(hiddenCount(text)).toBe(1000 - shown.length);
  });

  it('uses the singular when exactly one operation is hidden', () => {
    const operations = conversationWith(2);
    const oneFits = renderOperations(operations.slice(0, 1), 1).text.length;
    // Room for the first entry and the overflow line, not for the second entry.
    const { text, shown } = renderOperations(operations, 2, oneFits + 200);
    expect(shown).toHaveLength(1);
    expect(text.split('\n').at(-1)).toMatch(/^- …and 1 more paused operation not shown; /);
  });

  it.each([1, 10, 1000])('never cuts a line (%i operations)', (count) => {
    const operations = conversationWith(count);
    const { text, shown } = renderOperations(operations, count);
    const unbounded = renderOperations(operations, count, Number.POSITIVE_INFINITY).text.split('\n');
    const lines = text.split('\n');
    for (const line of lines) {
      expect(line.startsWith('## ') || line.startsWith('- ') || line.startsWith('  ')).toBe(true);
    }
    // Apart from the overflow line, the output is exactly the first whole lines the renderer
    // produces without a budget: nothing is truncated or reordered.
    const body = shown.length < count ? lines.slice(0, -1) : lines;
    expect(body).toEqual(unbounded.slice(0, body.length));
    // And it ends on an entry boundary: the next unbounded line (if any) starts a new entry.
    const next = unbounded[body.length];
    if (next !== undefined) {
      expect(next.startsWith('- ')).toBe(true);
    }
  });

  it('keeps each entry on whole lines even when notes hold newlines', () => {
    const { text } = renderOperations([operation(1, {}, 'line one\nline two\r\n\tline three')], 1);
    expect(text).toContain('  Notes: line one line two line three');
    expect(text.split('\n')).toHaveLength(4);
  });

  it('shows the active operation first, whatever order it is given in', () => {
    const paused = Array.from({ length: 30 }, (_, i) => operation(i + 1));
    const active = operation(99, { status: 'active', operation_type: 'the_active_one' });
    const { text, shown } = renderOperations([...paused, active], 31);
    expect(shown[0]?.operation_id).toBe(active.id);
    expect(shown[0]?.status).toBe('active');
    expect(text.split('\n')[1]).toMatch(/^- ACTIVE the_active_one /);
    expect(text.length).toBeLessThanOrEqual(2000);
    // The rest keep the order they were given in (most recently touched first).
    expect(shown.slice(1).map((s) => s.operation_id)).toEqual(paused.slice(0, shown.length - 1).map((p) => p.id));
  });

  it('tells the assistant what to call next for active and paused operations', () => {
    const active = operation(1, { status: 'active', completed_count: 100, failed_count: 0 }, null);
    const paused = operation(2, {}, null);
    const { text } = renderOperations([active, paused], 2);
    expect(text).toContain(`{"action":"complete","operation_id":"${active.id}"}`);
    expect(text).toContain(
      `To continue (paused: a new operation was created): {"action":"resume","operation_id":"${paused.id}"}`,
    );
  });
});
