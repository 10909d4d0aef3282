/**
 * The fair-share rule for a handler type's worker slots, as a pure function (the queue applies
 * it atomically for the whole fleet: see queue/fair-share.ts, its Redis script, which must stay
 * equivalent to {@link mayStart}, and its Postgres store, which calls it).
 *
 * The competing organizations are the ones waiting for slots of a type plus the candidate. Each
 * is guaranteed `max(1, floor(slots × weight / Σ weights of the competing))` of them, its weight
 * being the one an operator set for it (1..100; unset: 1). With every weight 1 that is
 * `max(1, floor(slots / competing))`. An organization below its guarantee may always start a
 * batch. One at or above it may start another only when that still leaves enough free slots for
 * every other waiting organization to reach its own guarantee. So a lone organization uses the
 * whole fleet, and as soon as another one waits, the next free slot is kept for the newcomer
 * instead of going to the one that already holds more than its share.
 *
 * Every waiting organization keeps a guarantee of at least 1, whatever the weights: a weight
 * shifts slots between organizations, never below one batch. Those floors can make the
 * guarantees add up to more than the slots (4 slots, weights 100, 1, 1: 3 + 1 + 1); then an
 * organization below its guarantee that already runs a batch may start another only when that
 * still leaves a free slot for every other waiting organization that runs none, so a newcomer's
 * first batch still starts within one batch budget. With every weight 1 this never applies, and
 * the rule is the unweighted one.
 */

/** The weights an operator may set (organization_quota.fair_share_weight). */
export const FAIR_SHARE_WEIGHT = { min: 1, max: 100, default: 1 } as const;

export interface FleetShareState {
  /** Slots of this handler type in the fleet (the sum of every live worker's concurrency). */
  slots: number;
  /** Batches of this type running now, by organization (the candidate's own batch not counted). */
  running: ReadonlyMap<string, number>;
  /**
   * Organizations with work of this type not yet handed out, with how many lanes (batches at
   * once) that work can use, counting the ones already running.
   */
  waiting: ReadonlyMap<string, number>;
  /** Weights of the waiting organizations and of the candidate; one absent weighs 1. */
  weights?: ReadonlyMap<string, number>;
}

/**
 * The slots an organization of weight `weight` is guaranteed when the competing organizations'
 * weights add up to `totalWeight` (at least 1). Integer arithmetic on both sides of the rule (the
 * Lua script computes the same floor of the same exact product and quotient).
 */
export function guaranteedShare(slots: number, totalWeight: number, weight = 1): number {
  return Math.max(1, Math.floor((slots * weight) / Math.max(1, totalWeight)));
}

/** Whether `organization` may start one more batch now. */
export function mayStart(state: FleetShareState, organization: string): boolean {
  const weightOf = (org: string) => state.weights?.get(org) ?? FAIR_SHARE_WEIGHT.default;
  let totalWeight = state.waiting.has(organization) ? 0 : weightOf(organization);
  for (const other of state.waiting.keys()) {
    totalWeight += weightOf(other);
  }
  const mine = state.running.get(organization) ?? 0;
  let busy = 0;
  for (const count of state.running.values()) {
    busy += count;
  }
  if (mine < guaranteedShare(state.slots, totalWeight, weightOf(organization))) {
    return (
      mine === 0 ||
      !overcommitted(state, organization, totalWeight, weightOf) ||
      busy + 1 + idleOthers(state, organization) <= state.slots
    );
  }
  // Slots the other waiting organizations still need to reach their guarantee (no more than
  // their work can use).
  let reserved = 0;
  for (const [other, lanes] of state.waiting) {
    if (other !== organization) {
      const share = guaranteedShare(state.slots, totalWeight, weightOf(other));
      reserved += Math.max(0, Math.min(share, lanes) - (state.running.get(other) ?? 0));
    }
  }
  return busy + 1 + reserved <= state.slots;
}

/**
 * Whether the competing organizations' guarantees add up to more than the slots: only with
 * weights, when some guarantees are held up to 1 (with every weight 1 and no more organizations
 * than slots they never do; with more, every guarantee is 1 and only a first batch is below it).
 */
function overcommitted(
  state: FleetShareState,
  organization: string,
  totalWeight: number,
  weightOf: (org: string) => number,
): boolean {
  let sum = state.waiting.has(organization) ? 0 : guaranteedShare(state.slots, totalWeight, weightOf(organization));
  for (const other of state.waiting.keys()) {
    sum += guaranteedShare(state.slots, totalWeight, weightOf(other));
  }
  return sum > state.slots;
}

/** Other waiting organizations that run no batch yet. */
function idleOthers(state: FleetShareState, organization: string): number {
  let idle = 0;
  for (const other of state.waiting.keys()) {
    if (other !== organization && (state.running.get(other) ?? 0) === 0) {
      idle++;
    }
  }
  return idle;
}
