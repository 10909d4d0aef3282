/**
 * Constants of the domain (statuses) spelled as SQL string literals, so statements and the
 * schema's check constraints name the same lists the code types with. Only for constants: a
 * value outside `[a-z_]` is refused, so nothing a tenant sends can reach a statement this way.
 */

/** `value` as an SQL string literal: `'value'`. */
export function sqlLiteral(value: string): string {
  if (!/^[a-z_]+$/.test(value)) {
    throw new Error(`sqlLiteral takes a constant of [a-z_], not ${JSON.stringify(value)}`);
  }
  return `'${value}'`;
}

/** `values` as a list of SQL string literals for `IN (…)`: `'a', 'b'`. */
export function sqlList(values: readonly string[]): string {
  return values.map(sqlLiteral).join(', ');
}
