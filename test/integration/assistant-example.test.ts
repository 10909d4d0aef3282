/**
 * examples/assistant against a local scripted model server (OpenAI chat completions wire format)
 * that forgets everything but the system prompt and the last message: it still completes a
 * 100-contact follow-up with exact counts, because the system prompt carries opspad's context
 * fragment every turn.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChatMessage, runAssistant } from '../../examples/assistant/assistant.ts';
import { contactTools } from '../../examples/assistant/contacts.ts';
import { type Harness, startHarness } from '../helpers/harness.ts';

/** What the scripted model does, from the system prompt and the last message only. */
function decide(system: string, last: ChatMessage): { content?: string; call?: { name: string; args: unknown } } {
  const active = /^- #\d+ ACTIVE send_sms, .*, id ([0-9a-f-]{36}): /m.exec(system)?.[1];
  const result = last.role === 'tool' ? (JSON.parse(last.content ?? '{}') as Record<string, unknown>) : {};
  if (last.role === 'user') {
    return { call: { name: 'search_contacts', args: { tag: 'Lead' } } };
  }
  if (Array.isArray(result.contact_ids)) {
    const ids = result.contact_ids as string[];
    return {
      call: {
        name: 'manage_assistant_operation',
        args: { action: 'create', operation_type: 'send_sms', total_items: ids.length, item_ids: ids, batch_size: 10 },
      },
    };
  }
  if (Array.isArray(result.sent) && active) {
    return {
      call: {
        name: 'manage_assistant_operation',
        args: { action: 'update', operation_id: active, completed_ids: result.sent, failed: result.failed },
      },
    };
  }
  if (Array.isArray(result.batch) && (result.batch as string[]).length > 0) {
    return { call: { name: 'send_sms', args: { contact_ids: result.batch } } };
  }
  if (result.status === 'completed') {
    return { content: `Done: ${result.completed_count} sent, ${result.failed_count} failed.` };
  }
  if (active && system.includes('every item is recorded: complete')) {
    return { call: { name: 'manage_assistant_operation', args: { action: 'complete', operation_id: active } } };
  }
  if (active) {
    return { call: { name: 'manage_assistant_operation', args: { action: 'progress', operation_id: active } } };
  }
  return { content: 'I am not sure what to do.' };
}

describe('the example assistant (postgres)', () => {
  let harness: Harness;
  let model: Server;
  let modelUrl: string;
  const seen: { messages: number }[] = [];

  beforeAll(async () => {
    harness = await startHarness('postgres');
    model = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) {
        chunks.push(chunk as Buffer);
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { messages: ChatMessage[] };
      seen.push({ messages: body.messages.length });
      // The model forgets: only the system prompt and the last message count.
      const system = body.messages[0]?.content ?? '';
      const last = body.messages.at(-1) as ChatMessage;
      const decision = decide(system, last);
      const message = decision.call
        ? {
            role: 'assistant',
            content: null,
            tool_calls: [
              {
                id: `call_${randomUUID()}`,
                type: 'function',
                function: { name: decision.call.name, arguments: JSON.stringify(decision.call.args) },
              },
            ],
          }
        : { role: 'assistant', content: decision.content };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ choices: [{ message }] }));
    });
    model.listen(0, '127.0.0.1');
    await new Promise((resolve) => model.once('listening', resolve));
    modelUrl = `http://127.0.0.1:${(model.address() as AddressInfo).port}/v1`;
  });
  afterAll(async () => {
    await harness.close();
    await new Promise((resolve) => model.close(resolve));
  });

  it('completes a 100-contact follow-up with exact counts, remembering only the system prompt and the last message', async () => {
    const tenant = await harness.newTenant();
    const app = contactTools(100);
    const conversationId = randomUUID();
    const result = await runAssistant({
      opspad: { url: harness.url, apiKey: tenant.apiKey, conversationId },
      llm: { baseUrl: modelUrl, model: 'scripted' },
      localTools: app.tools,
      userMessage: 'Send a follow-up SMS to every contact tagged Lead',
      historyLimit: 1,
    });
    const failing = app.contacts.filter(app.hasNoPhone).length;
    expect(result.answer).toBe(`Done: ${100 - failing} sent, ${failing} failed.`);
    expect(app.sent).toHaveLength(100 - failing);
    expect(new Set(app.sent).size).toBe(100 - failing); // nobody got the SMS twice
    expect(seen.every((request) => request.messages === 2)).toBe(true);
    const rows = await harness.db.query<{ status: string; completed_count: number; failed_count: number }>(
      'SELECT status, completed_count, failed_count FROM assistant_operation WHERE conversation_id = $1',
      [conversationId],
    );
    expect(rows).toEqual([{ status: 'completed', completed_count: 100 - failing, failed_count: failing }]);
  });
});
