/**
 * examples/context-editing/anthropic.ts with the official Anthropic SDK against a local server
 * speaking the Messages wire (its beta endpoint), scripted to decide from the system prompt and
 * its last message: every request carries both context edits, read_working_memory excluded from
 * clearing; after a compaction the loop hands the model its working memory, and the 100-contact
 * follow-up still ends with exact counts.
 */
import { randomUUID } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BETAS, runWithContextEditing, WORKING_MEMORY_TOOL } from '../../examples/context-editing/anthropic.ts';
import { createClient } from '../../src/client/index.ts';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';
import { followUp, type ScriptedModel, startScriptedAnthropic } from '../helpers/scripted-models.ts';

describe('the context editing and compaction recipe (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;
  let scripted: ScriptedModel;

  beforeAll(async () => {
    harness = await startHarness('postgres');
    tenant = await harness.newTenant();
    // Compacted twice: early in the work and in the middle of it.
    scripted = await startScriptedAnthropic(followUp, { compactAt: [5, 20] });
  });
  afterAll(async () => {
    await scripted?.close();
    await harness?.close();
  });

  it('finishes a 100-item follow-up through two compactions, reading its working memory after each', async () => {
    const conversationId = randomUUID();
    const answer = await runWithContextEditing({
      anthropic: new Anthropic({ apiKey: 'scripted', baseURL: scripted.url, maxRetries: 0 }),
      opspad: createClient({ baseUrl: harness.url, apiKey: tenant.apiKey }),
      conversationId,
      task: 'Send a follow-up SMS to every contact tagged Lead',
      model: 'scripted',
    });
    expect(answer).toBe('Done: 92 sent, 8 failed.');
    for (const request of scripted.requests) {
      expect(request.body.context_management).toMatchObject({
        edits: [
          { type: 'clear_tool_uses_20250919', exclude_tools: [WORKING_MEMORY_TOOL] },
          { type: 'compact_20260112', pause_after_compaction: true },
        ],
      });
      expect(request.tools).toContain(WORKING_MEMORY_TOOL);
    }
    // The request after each compaction ends with the working memory, read from opspad.
    const afterCompaction = [5, 20].map((n) => scripted.requests[n]?.body.messages as { content: unknown }[]);
    expect(JSON.stringify(afterCompaction[0]?.at(-1))).toContain('Your working memory now');
    expect(JSON.stringify(afterCompaction[1]?.at(-1))).toMatch(/Your working memory now.*ACTIVE send_sms/);
    expect(BETAS).toEqual(['context-management-2025-06-27', 'compact-2026-01-12']);
    const operations = await harness.db.query<{ status: string; completed_count: number; failed_count: number }>(
      `SELECT status, completed_count, failed_count FROM assistant_operation
       WHERE organization_id = $1 AND conversation_id = $2`,
      [tenant.organizationId, conversationId],
    );
    expect(operations).toEqual([{ status: 'completed', completed_count: 92, failed_count: 8 }]);
  });
});
