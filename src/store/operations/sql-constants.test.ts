/**
 * The admission's SQL functions spell the domain's constants as literals: the open statuses the
 * quota counts, who paused an operation a newer one replaced, the advisory lock class of the
 * background limit, and the SQLSTATEs of their refusals. These must be the TypeScript's own.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { OPEN_STATUSES } from '../../domain/operation.ts';
import { NEWER_OPERATION } from '../../domain/paused-by.ts';
import { XACT_LOCK_CLASS } from '../db/lock-keys.ts';
import { BACKGROUND_LIMIT_REFUSED, QUOTA_REFUSED } from '../db/pg-errors.ts';

function sqlOf(name: string): string {
  return readFileSync(new URL(`./sql/${name}.sql`, import.meta.url), 'utf8')
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .join('\n');
}

describe('the admission functions’ constants', () => {
  it('count as open the statuses the domain calls open', () => {
    const list = /o\.status IN \(([^)]*)\)/.exec(sqlOf('opspad_count_open_operations'))?.[1] ?? '';
    const statuses = [...list.matchAll(/'([a-z_]+)'/g)].map((match) => match[1]);
    expect(statuses.sort()).toEqual([...OPEN_STATUSES].sort());
  });

  it('pause for a newer operation as the domain names it', () => {
    expect(sqlOf('opspad_pause_active')).toContain(`'paused_by', '${NEWER_OPERATION}'`);
  });

  it('take the background admission lock of lock-keys.ts', () => {
    expect(sqlOf('opspad_assert_background_capacity')).toContain(
      `pg_advisory_xact_lock(${XACT_LOCK_CLASS.backgroundAdmission}, hashtext(p_organization::text))`,
    );
  });

  it('refuse with the SQLSTATEs the store answers', () => {
    expect(sqlOf('opspad_reserve_quota').match(/ERRCODE = '([A-Z0-9]+)'/g)).toEqual([
      `ERRCODE = '${QUOTA_REFUSED}'`,
      `ERRCODE = '${QUOTA_REFUSED}'`,
    ]);
    expect(sqlOf('opspad_assert_background_capacity').match(/ERRCODE = '([A-Z0-9]+)'/g)).toEqual([
      `ERRCODE = '${BACKGROUND_LIMIT_REFUSED}'`,
    ]);
  });
});
