/**
 * The step functions spell statuses as SQL literals; these must be the lifecycle's own: the
 * operation statuses in which a step goes ahead are those in which the lifecycle table allows
 * its action, each written once (opspad_lease_usual, opspad_record_usual), and the item
 * statuses they read and write are the lease path's.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ITEM_LEASABLE, ITEM_RECORDED, statusesAllowing } from '../../domain/operation-lifecycle.ts';

function sqlOf(name: string): string {
  return readFileSync(new URL(`./sql/${name}.sql`, import.meta.url), 'utf8')
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .join('\n');
}

function literals(text: string): string[] {
  return [...text.matchAll(/'([a-z_]+)'/g)].map((match) => match[1] as string);
}

/** The operation statuses a function compares `op.status` (or `p_status`) with, in the order written. */
function operationStatuses(sql: string): string[][] {
  return [...sql.matchAll(/(?:op\.|p_)status\s*(?:<>|=|NOT IN|IN)\s*(\([^)]*\)|'[a-z_]+')/g)].map((match) =>
    literals(match[1] as string),
  );
}

/** The item statuses a function reads or writes: `i.status`, `r.status`, `SET status = …`. */
function itemStatuses(sql: string): Set<string> {
  const found = new Set<string>();
  for (const match of sql.matchAll(/\b[ir]\.status\s*=\s*'([a-z_]+)'/g)) {
    found.add(match[1] as string);
  }
  for (const match of sql.matchAll(/SET status\s*=\s*(CASE[^,]*END|'[a-z_]+')/g)) {
    for (const literal of literals(match[1] as string)) {
      found.add(literal);
    }
  }
  return found;
}

const sorted = (values: Iterable<string>) => [...values].sort();

describe('the step functions’ statuses', () => {
  it('lease only where the lifecycle allows a lease, in one place', () => {
    expect(operationStatuses(sqlOf('opspad_lease_usual'))).toEqual([statusesAllowing('lease')]);
    expect(operationStatuses(sqlOf('opspad_lease_step'))).toEqual([]);
    expect(sqlOf('opspad_lease_step')).toContain('opspad_lease_usual(');
  });

  it('record only where the lifecycle allows a record, and lease on as a lease would', () => {
    expect(operationStatuses(sqlOf('opspad_record_usual'))).toEqual([statusesAllowing('record')]);
    for (const step of ['opspad_record_step', 'opspad_record_lease_step']) {
      expect(operationStatuses(sqlOf(step))).toEqual([]);
      expect(sqlOf(step)).toContain('opspad_record_usual(');
    }
    expect(sqlOf('opspad_record_lease_step')).toContain('opspad_lease_usual(');
  });

  it("complete, with a worker's record, only where the lifecycle lets workers complete", () => {
    const completing = [...sqlOf('opspad_record_step').matchAll(/o\.status IN (\([^)]*\))/g)].map((match) =>
      literals(match[1] as string),
    );
    expect(completing).toEqual([statusesAllowing('complete_if_done')]);
  });

  it('lease pending items and record them as completed or failed', () => {
    expect(sorted(itemStatuses(sqlOf('opspad_lease_items')))).toEqual([ITEM_LEASABLE]);
    expect(sorted(itemStatuses(sqlOf('opspad_record_owned')))).toEqual(sorted([ITEM_LEASABLE, ...ITEM_RECORDED]));
  });
});
