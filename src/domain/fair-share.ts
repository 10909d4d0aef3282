/**
 * The fair-share rule for a handler type's worker slots, as a pure function (the queue applies
 * it in Redis, atomically, for the whole fleet: see queue/fair-share.ts and its Lua script, which
 * must stay equivalent to {@link mayStart}).
 *
 * Every organization that is waiting for slots of a type is guaranteed
 * `max(1, floor(slots / waiting organizations))` of them. An organization below its guarantee
 * may always start a batch. One at or above it may start another only when that still leaves
 * enough free slots for every other waiting organization to reach its own guarantee. So a lone
 * organization uses the whole fleet, and as soon as another one waits, the next free slot is
 * kept for the newcomer instead of going to the one that already holds more than its share.
 */

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
}

/** The slots each of `organizations` waiting organizations is guaranteed (at least 1). */
export function guaranteedShare(slots: number, organizations: number): number {
  return Math.max(1, Math.floor(slots / Math.max(1, organizations)));
}

/** Whether `organization` may start one more batch now. */
export function mayStart(state: FleetShareState, organization: string): boolean {
  const competing = state.waiting.has(organization) ? state.waiting.size : state.waiting.size + 1;
  const share = guaranteedShare(state.slots, competing);
  const mine = state.running.get(organization) ?? 0;
  if (mine < share) {
    return true;
  }
  let busy = 0;
  for (const count of state.running.values()) {
    busy += count;
  }
  // Slots the other waiting organizations still need to reach their guarantee (no more than
  // their work can use).
  let reserved = 0;
  for (const [other, lanes] of state.waiting) {
    if (other !== organization) {
      reserved += Math.max(0, Math.min(share, lanes) - (state.running.get(other) ?? 0));
    }
  }
  return busy + 1 + reserved <= state.slots;
}
