/**
 * Bounds on what a tenant may accumulate, rather than send in one call: notes per scope, the
 * bytes one read of them answers, and each organization's storage quota (an operator may set
 * another for one organization: `opspad orgs limits`). Part of the `limits` settings
 * (src/config/settings-parts.ts).
 */
import { z } from 'zod';
import { positiveInt } from './parsers.ts';

export const TENANT_BOUND_SETTINGS = {
  OPSPAD_MAX_NOTES_PER_SCOPE: positiveInt.default(1000).meta({
    description:
      "Notes one scope may hold (an execution's, a conversation's own, a conversation's persistent ones); a write beyond is refused (409).",
    bound: 'notes per scope',
  }),
  // A read answers at least one note, so this never hides a note (a note is at most 64 KiB).
  OPSPAD_MAX_READ_BYTES: positiveInt
    .pipe(z.number().min(65_536, 'must be at least 65536'))
    .default(256 * 1024)
    .meta({
      description:
        'Bytes of notes one read answers (at least 65536); beyond, the answer is a page and says how to ask for the next one.',
      bound: 'bytes of notes one read answers',
    }),
  OPSPAD_MAX_RUNNING_EXECUTIONS: positiveInt.default(100).meta({
    description: 'Running (not ended) executions one conversation may have; starting one more is refused (409).',
    bound: 'running executions per conversation',
  }),
  OPSPAD_MAX_STORED_ITEMS: positiveInt.default(10_000_000).meta({
    description:
      "Items one organization's operations may hold until retention deletes them; a create beyond is refused (409). `opspad orgs limits` sets another for one organization.",
    bound: 'stored items per organization',
  }),
  OPSPAD_MAX_OPEN_OPERATIONS: positiveInt.default(1000).meta({
    description:
      'Open (active, paused or awaiting approval) operations one organization may have; a create beyond is refused (409). `opspad orgs limits` sets another for one organization.',
    bound: 'open operations per organization',
  }),
};
