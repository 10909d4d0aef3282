/**
 * The domain's groups of operation statuses (domain/operation.ts) spelled for `status IN (…)`:
 * every statement and index predicate that names one takes it from here, so none can drift
 * from the statuses the code types with.
 */
import { FINISHED_STATUSES, OPEN_STATUSES } from '../../domain/operation.ts';
import { sqlList } from '../db/sql-literal.ts';

/** Not finished: active, paused or awaiting approval. */
export const OPEN_STATUSES_SQL = sqlList(OPEN_STATUSES);
/** Finished: the operation changes no more. */
export const FINISHED_STATUSES_SQL = sqlList(FINISHED_STATUSES);
