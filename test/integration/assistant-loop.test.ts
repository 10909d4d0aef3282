/**
 * The promise of opspad in one test: an assistant that remembers only its last 4 messages still
 * finishes a 200-item operation and answers from its facts, because every turn it reads the
 * context fragment — and nothing else — to find its place.
 *
 * The "model" here is a deterministic policy standing in for an LLM: each turn it receives the
 * system prompt (the fragment) and the last 4 messages, and may call the tools. It keeps no
 * state of its own between turns.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';

interface Message {
  role: 'user' | 'assistant' | 'tool';
  content: string;
}

const CONTACTS = Array.from({ length: 200 }, (_, i) => `contact-${i + 1}`);
/** The outside world: which contacts have no phone number (the "SMS provider" refuses them). */
const hasNoPhone = (id: string) => Number(id.split('-')[1]) % 13 === 0;

describe('an assistant with a 4-message memory (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;

  beforeAll(async () => {
    harness = await startHarness('postgres');
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    await harness.close();
  });

  it('finishes a 200-item follow-up and answers from its facts, using only the context fragment', async () => {
    const conversation = randomUUID();
    const call = async (tool: string, input: unknown) => {
      const response = await tenant.tool(conversation, input, tool);
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      return response.body;
    };

    /** One turn of the stand-in model: reads the fragment, acts, says what it did. */
    async function turn(system: string, recent: readonly Message[]): Promise<string> {
      const lastUser = [...recent].reverse().find((m) => m.role === 'user')?.content ?? '';
      const active = /^- #\d+ ACTIVE send_sms, .*, id ([0-9a-f-]{36}): /m.exec(system);
      if (lastUser.startsWith('Which contacts')) {
        // Answer from the recited facts only.
        const noPhone = [...system.matchAll(/^- (contact-\d+) has no phone number \[item:/gm)].map((m) => m[1]);
        return `No phone number: ${noPhone.join(', ')}`;
      }
      if (!active && !system.includes('Scratchpad v')) {
        // First turn: look the contacts up, plan in the pad, create the operation.
        await call('update_scratchpad', {
          task: lastUser,
          add: {
            refs: [{ id: 'crm:search-1', kind: 'tool_call', label: 'contacts tagged Lead' }],
            facts: [{ text: `${CONTACTS.length} contacts are tagged Lead`, source_ref: 'crm:search-1' }],
          },
        });
        const created = await call('manage_assistant_operation', {
          action: 'create',
          operation_type: 'send_sms',
          total_items: CONTACTS.length,
          item_ids: CONTACTS,
          batch_size: 10,
          query_params: { tag: 'Lead' },
        });
        return `Created operation ${created.operation_id}.`;
      }
      if (active?.[1] && system.includes('every item is recorded: complete')) {
        const done = await call('manage_assistant_operation', { action: 'complete', operation_id: active[1] });
        return `Done: ${done.completed_count} sent, ${done.failed_count} failed.`;
      }
      if (active?.[1]) {
        const operationId = active[1];
        const progress = await call('manage_assistant_operation', { action: 'progress' });
        const batch = progress.batch as string[];
        const failed = batch.filter(hasNoPhone).map((id) => ({ id, reason: 'no phone number' }));
        await call('manage_assistant_operation', {
          action: 'update',
          operation_id: operationId,
          completed_ids: batch.filter((id) => !hasNoPhone(id)),
          failed,
        });
        if (failed.length > 0) {
          await call('update_scratchpad', {
            add: {
              refs: failed.map((f) => ({ id: `item:${operationId}:${f.id}`, kind: 'item' })),
              facts: failed.map((f) => ({
                text: `${f.id} has no phone number`,
                source_ref: `item:${operationId}:${f.id}`,
              })),
            },
          });
        }
        return `Sent ${batch.length - failed.length} of ${batch.length}.`;
      }
      return 'Nothing to do.';
    }

    const transcript: Message[] = [{ role: 'user', content: 'Send a follow-up SMS to every contact tagged Lead' }];
    let turns = 0;
    for (; turns < 100; turns++) {
      const system = (await tenant.context(conversation)).body.text;
      const reply = await turn(system, transcript.slice(-4));
      transcript.push({ role: 'assistant', content: reply });
      if (reply.startsWith('Done:')) {
        break;
      }
      transcript.push({ role: 'user', content: 'continue' });
    }
    expect(transcript.at(-1)?.content).toBe('Done: 185 sent, 15 failed.');
    expect(turns).toBeLessThan(30); // 20 batches, then complete

    transcript.push({ role: 'user', content: 'Which contacts had no phone number?' });
    const system = (await tenant.context(conversation)).body.text;
    expect(system).not.toContain('ACTIVE send_sms'); // the completed operation left the fragment
    const answer = await turn(system, transcript.slice(-4));
    expect(answer).toBe(`No phone number: ${CONTACTS.filter(hasNoPhone).join(', ')}`);
  });
});
