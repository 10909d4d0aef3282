/**
 * Which errors say the database is gone (answered as a 503 the caller may retry) and which say
 * the statement was wrong (answered as they always were).
 */
import { describe, expect, it } from 'vitest';
import { isDatabaseGone } from './pg-errors.ts';

describe('isDatabaseGone', () => {
  it.each([
    ['a refused connection', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
    ['an administrator shutdown', { code: '57P01', message: 'terminating connection due to administrator command' }],
    [
      'a crash shutdown',
      { code: '57P02', message: 'terminating connection because of crash of another server process' },
    ],
    ['a server starting up', { code: '57P03', message: 'the database system is starting up' }],
    ['no writable node among the hosts', { code: '08001', message: 'no read-write server among the hosts' }],
    ['a write on a node just demoted', { code: '25006', message: 'cannot execute UPDATE in a read-only transaction' }],
    ['a connection lost mid-query', new Error('Connection terminated unexpectedly')],
  ])('is true for %s', (_what, error) => {
    expect(isDatabaseGone(error)).toBe(true);
  });

  it.each([
    ['a unique violation', { code: '23505', message: 'duplicate key value violates unique constraint' }],
    ['a deadlock', { code: '40P01', message: 'deadlock detected' }],
    ['a syntax error', { code: '42601', message: 'syntax error at or near "SELEC"' }],
    ['nothing at all', undefined],
  ])('is false for %s', (_what, error) => {
    expect(isDatabaseGone(error)).toBe(false);
  });
});
