/**
 * What the operation tool needs from the rest of opspad: the database, the limits a call is
 * checked against, and the hooks that dispatch and stop background work.
 */
import type { OperationRecord } from '../domain/operation.ts';
import type { SizeLimits } from '../domain/size-limits.ts';
import type { FieldIssue } from '../domain/validation.ts';
import type { Database, QuotaDefaults } from '../store/index.ts';

/** What the operation tool needs from the rest of opspad. */
export interface OperationToolDeps {
  db: Database;
  /** OPSPAD_MAX_ITEMS: the largest operation a create may make. */
  maxItems: number;
  /** OPSPAD_MAX_QUERY_PARAMS_BYTES, OPSPAD_MAX_NOTE_BYTES, …: what one call may store. */
  sizeLimits?: SizeLimits;
  /** OPSPAD_MAX_ACTIVE_BACKGROUND: active background operations per organization. */
  maxActiveBackground?: number;
  /** OPSPAD_MAX_STORED_ITEMS and OPSPAD_MAX_OPEN_OPERATIONS: the organization's quota defaults. */
  quota?: QuotaDefaults;
  /** OPSPAD_QUEUE_PREFIX: recorded on background operations (their reconciler's scope). */
  queuePrefix?: string;
  /** Whether a worker handler is registered for the type: then `background` is the default. */
  hasHandler(operationType: string): boolean;
  /**
   * Problems with the query_params of a background operation of this type (its handler's
   * checks, e.g. the webhook URL); any refuses the create before anything is stored.
   */
  checkQueryParams?(operationType: string, queryParams: Readonly<Record<string, unknown>>): readonly FieldIssue[];
  /** Called after an operation became active (create, resume, retry), e.g. to dispatch work. */
  onActivated?(operation: OperationRecord): Promise<void>;
  /** Called after an operation was paused or cancelled, e.g. to abort batches in flight. */
  onStopped?(operation: OperationRecord, reason: string): Promise<void>;
}
