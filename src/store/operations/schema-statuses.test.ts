/**
 * The statuses have one definition (domain/operation.ts and the lifecycle's item statuses): the
 * schema's check constraints are built from those lists, and the general path's statements spell
 * no status of their own.
 */
import { readFileSync } from 'node:fs';
import { getTableConfig, PgDialect } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import { ITEM_STATUS, OPERATION_STATUS } from '../../domain/operation.ts';
import { ITEM_LEASABLE } from '../../domain/operation-lifecycle.ts';
import { sqlLiteral } from '../db/sql-literal.ts';
import { assistantOperation, assistantOperationItem } from './schema.ts';

const dialect = new PgDialect();

function checkSql(table: Parameters<typeof getTableConfig>[0], name: string): string {
  const check = getTableConfig(table).checks.find((c) => c.name === name);
  if (!check) {
    throw new Error(`no check constraint ${name}`);
  }
  return dialect.sqlToQuery(check.value).sql;
}

const quoted = (values: readonly string[]) => values.map((v) => `'${v}'`).join(', ');

describe('the statuses’ one definition', () => {
  it('builds the check constraints from the domain’s lists', () => {
    expect(checkSql(assistantOperation, 'ck_assistant_operation_status')).toBe(
      `status IN (${quoted(OPERATION_STATUS)})`,
    );
    expect(checkSql(assistantOperationItem, 'ck_assistant_operation_item_status')).toBe(
      `status IN (${quoted(ITEM_STATUS)})`,
    );
    expect(getTableConfig(assistantOperationItem).columns.find((c) => c.name === 'status')?.default).toBe(
      ITEM_LEASABLE,
    );
  });

  it('leaves no status literal in the general path’s item statements', () => {
    const source = readFileSync(new URL('../leases/item-sql.ts', import.meta.url), 'utf8');
    const statuses = new Set<string>([...ITEM_STATUS, ...OPERATION_STATUS]);
    const literals = [...source.matchAll(/'([a-z_]+)'/g)].map((m) => m[1] as string);
    expect(literals.filter((literal) => statuses.has(literal))).toEqual([]);
  });

  it('spells only constants as literals', () => {
    expect(sqlLiteral('pending')).toBe("'pending'");
    expect(() => sqlLiteral("x'; DROP TABLE organization; --")).toThrow(/constant/);
  });
});
