/**
 * The "typical" context of issue 13's pricing: two operations (one active, one paused by an
 * operator) with 40 of 100 items recorded each, and a pad of the task's goal and 20 facts that
 * cite those operations. Shared by the domain test (≤ 400 tokens) and the benchmark
 * (`context_tokens_typical`), so both price the same thing.
 */
import { normalizePad, type Pad } from '../../src/domain/scratchpad.ts';

export const TYPICAL_TASK = 'Send a follow-up SMS to every contact tagged Lead';

/** 20 facts of two lengths, each citing one of the two operations. */
export function typicalFacts(activeId: string, pausedId: string): { text: string; source_ref: string }[] {
  return Array.from({ length: 20 }, (_, i) => ({
    text: i % 2 ? `contact-${i * 7} has no phone number` : `contact-${i * 7} asked to be called on Tuesday instead`,
    source_ref: `operation:${i % 3 ? activeId : pausedId}`,
  }));
}

export function typicalPad(activeId: string, pausedId: string): Pad {
  return normalizePad(
    {
      facts: typicalFacts(activeId, pausedId),
      refs: [
        { id: `operation:${activeId}`, kind: 'operation', label: 'send_sms' },
        { id: `operation:${pausedId}`, kind: 'operation', label: 'update_contacts' },
      ],
    },
    TYPICAL_TASK,
  );
}
