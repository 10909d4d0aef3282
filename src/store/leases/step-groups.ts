/**
 * A worker process's lanes of one operation record and lease together: while one lane's call
 * (opspad_record_lease_step) is in flight, the lanes that finish a batch meanwhile wait for it
 * and then go in one call, opspad_record_lease_steps, which records and leases each of them
 * exactly as the single call does, but updates the operation row once and commits once.
 *
 * Why: the record's last statement updates the operation row (its counters and cursor), and its
 * lock is held through the commit, so the lanes of one operation take turns there, whatever the
 * number of lanes. Measured on the calls alone (two connections, each lane's report sent as soon
 * as its call answered, on the 2-core development machine): at 100 items a batch, 43–55k items/s
 * with one lane a connection against 87–102k with four to eight lanes a connection going
 * together; at 10 items, 5–7k against 21–23k; at 1,000 items, the same (139–174k). The
 * function's own work per item does not change; the commits and the waits on the row do.
 *
 * Nothing waits for a group to fill: a lane alone goes at once, as before; a lane arriving while
 * its operation's call is in flight joins the next call, sent the moment that one answers. A
 * group holds at most GROUP_MAX_ITEMS items (at 1,000 items a batch, lanes gain nothing by going
 * together). If the group's call declines, one of its ids may not be recorded (a late worker,
 * a report the general path must decide) or it fails, it rolls back whole and each lane goes
 * alone. The lanes' answers are their own calls' but for two things: each carries the operation
 * as the whole group left it, and the group's events are its records and then its leases.
 *
 * State: one table of groups per database handle (a process's pool), kept while calls are in
 * flight; an operation's entry goes when its last call answers.
 */
import { countsOf } from '../../domain/operation.ts';
import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';
import {
  callStep,
  type NextLease,
  type NextLeaseParams,
  type RecordReportParams,
  recordLeaseStep,
  type StepRow,
} from './step-calls.ts';

/**
 * The most items a grouped call records (a whole lease counts its items, not its one id); a lane
 * whose batch is larger goes in a call of its own.
 */
export const GROUP_MAX_ITEMS = 1000;

const RECORD_LEASE_STEPS_SQL = prepared(
  'SELECT * FROM opspad_record_lease_steps($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)',
);

/** The items a lane's report records: its ids, or its whole lease's size. */
const itemsOf = (params: RecordLeaseParams) => params.whole ?? params.ids.length;

/** What a lane asks and is answered: those of its own call, recordLeaseStep. */
export type RecordLeaseParams = RecordReportParams & NextLeaseParams;
export type RecordLeaseResult = Awaited<ReturnType<typeof recordLeaseStep>>;

interface Waiting {
  params: RecordLeaseParams;
  resolve(result: RecordLeaseResult): void;
  reject(error: unknown): void;
}

interface Group {
  scope: ConversationScope;
  waiting: Waiting[];
}

const groupsByDatabase = new WeakMap<Queryable, Map<string, Group>>();

/**
 * {@link recordLeaseStep}, grouped with the same operation's other lanes in this process (see
 * above); the same answer, and null, having changed nothing, in the same cases.
 */
export function recordLeaseGrouped(
  db: Queryable,
  scope: ConversationScope,
  params: RecordLeaseParams,
): Promise<RecordLeaseResult> {
  let groups = groupsByDatabase.get(db);
  if (!groups) {
    groups = new Map();
    groupsByDatabase.set(db, groups);
  }
  // Lanes go together only when everything but their own report and batch size is the same.
  const key = [params.operationId, scope.organizationId, scope.conversationId, params.epoch, params.leaseSeconds].join(
    ' ',
  );
  const inFlight = groups.get(key);
  if (inFlight) {
    return new Promise((resolve, reject) => inFlight.waiting.push({ params, resolve, reject }));
  }
  const group: Group = { scope, waiting: [] };
  groups.set(key, group);
  const table = groups;
  const alone = recordLeaseStep(db, scope, params);
  void alone.then(
    () => sendNext(db, table, key, group),
    () => sendNext(db, table, key, group),
  );
  return alone;
}

/** After a call of the group answers: the lanes that waited meanwhile go in the next call. */
function sendNext(db: Queryable, groups: Map<string, Group>, key: string, group: Group): void {
  if (group.waiting.length === 0) {
    groups.delete(key);
    return;
  }
  const members: Waiting[] = [];
  let items = 0;
  while (group.waiting.length > 0) {
    const next = group.waiting[0] as Waiting;
    if (members.length > 0 && items + itemsOf(next.params) > GROUP_MAX_ITEMS) {
      break;
    }
    members.push(next);
    items += itemsOf(next.params);
    group.waiting.shift();
  }
  void sendGroup(db, group.scope, members).finally(() => sendNext(db, groups, key, group));
}

/** One call for `members` (each lane alone if it declines); settles each member's promise. */
async function sendGroup(db: Queryable, scope: ConversationScope, members: Waiting[]): Promise<void> {
  if (members.length === 1) {
    const only = members[0] as Waiting;
    await recordLeaseStep(db, scope, only.params).then(only.resolve, only.reject);
    return;
  }
  // Any error of the group's call (a report Postgres refuses, say) sends each lane alone: the
  // error then reaches only the lane whose report caused it.
  const rows = await callStep<StepRow & { lane_owner: string; item_ids: string[]; lease: NextLease['kind'] }>(
    db,
    RECORD_LEASE_STEPS_SQL,
    groupArguments(scope, members),
  ).catch(() => null);
  if (
    !rows ||
    rows.length !== members.length ||
    rows.some((row, index) => row.lane_owner !== members[index]?.params.owner)
  ) {
    await Promise.all(
      members.map((member) => recordLeaseStep(db, scope, member.params).then(member.resolve, member.reject)),
    );
    return;
  }
  members.forEach((member, index) => {
    const { lane_owner: _owner, in_flight, item_ids, lease, ...operation } = rows[index] as (typeof rows)[number];
    const next: NextLease = lease === 'leased' ? { kind: 'leased', batch: item_ids } : { kind: lease };
    member.resolve({ operation, counts: countsOf(operation, in_flight), next });
  });
}

/**
 * The grouped call's arguments: the lanes' owners, their reports flattened in order, sizes,
 * limits, and which reports are whole leases.
 */
function groupArguments(scope: ConversationScope, members: readonly Waiting[]): unknown[] {
  const first = (members[0] as Waiting).params;
  const anyFailed = members.some((member) => member.params.reasons !== null);
  return [
    first.operationId,
    scope.organizationId,
    scope.conversationId,
    members.map((member) => member.params.owner),
    members.map((member) => member.params.ids.length),
    members.flatMap((member) => member.params.ids),
    anyFailed ? members.flatMap((member) => member.params.reasons ?? member.params.ids.map(() => null)) : null,
    first.leaseSeconds,
    members.map((member) => member.params.batchSize ?? null),
    first.epoch ?? null,
    members.some((member) => member.params.whole !== undefined)
      ? members.map((member) => member.params.whole ?? null)
      : null,
  ];
}
