/**
 * Who paused an operation, as the model must hear it: its own pause, an operator's (then it asks
 * the user before resuming), the circuit breaker's (then it looks at the failures first), or a
 * newer operation of the same conversation (then resuming is its own decision).
 *
 * Stored in `state_json.paused_by` as `assistant`, `operator:<user>`, `circuit_breaker` or
 * `newer_operation`; any other actor (an older row, a maintenance job) is kept as it was.
 */

export type PausedByKind = 'assistant' | 'operator' | 'circuit_breaker' | 'newer_operation' | 'other';

export interface PausedBy {
  kind: PausedByKind;
  /** The operator's user name, for `operator`; the actor, for `other`. */
  name?: string;
}

export const NEWER_OPERATION = 'newer_operation';
export const CIRCUIT_BREAKER = 'circuit_breaker';

/** The stored `paused_by` of a pause made by `actor` through the operation tool. */
export function pauserOfActor(actor: string): string {
  if (actor.startsWith('api_key:') || actor === 'assistant') {
    return 'assistant';
  }
  return actor;
}

/** The stored value read back; `undefined` when the pause predates the record. */
export function parsePausedBy(stored: string | null | undefined): PausedBy | undefined {
  if (!stored) {
    return undefined;
  }
  if (stored === 'assistant' || stored === CIRCUIT_BREAKER || stored === NEWER_OPERATION) {
    return { kind: stored };
  }
  if (stored.startsWith('operator:')) {
    return { kind: 'operator', name: stored.slice('operator:'.length) };
  }
  return { kind: 'other', name: stored };
}

/** The reason recorded with a pause by `pausedBy` through the `pause` action. */
export function pauseReasonOf(stored: string): string {
  const by = parsePausedBy(stored);
  return by?.kind === 'operator'
    ? `paused by operator ${by.name}`
    : `paused by ${stored === 'assistant' ? 'the assistant' : stored}`;
}

/** Short words for the context fragment: "you", "operator alice", "the circuit breaker", … */
export function pausedByWords(by: PausedBy | undefined): string {
  switch (by?.kind) {
    case 'assistant':
      return 'you';
    case 'operator':
      return `operator ${by.name}`;
    case 'circuit_breaker':
      return 'the circuit breaker';
    case 'newer_operation':
      return 'a newer operation';
    case 'other':
      return String(by.name);
    default:
      return 'unknown';
  }
}

/**
 * The `paused_by` of an operation paused before it was recorded: from its reason (a newer
 * operation, the circuit breaker) or else the actor of its last `paused` event.
 */
export function legacyPausedBy(reason: string | null | undefined, eventActor: string | undefined): string | undefined {
  if (
    reason === 'a new operation was created' ||
    reason === 'a retry operation was created' ||
    /^operation \S+ was resumed$/.test(reason ?? '')
  ) {
    return NEWER_OPERATION;
  }
  if (reason?.startsWith('circuit breaker:') || eventActor === CIRCUIT_BREAKER) {
    return CIRCUIT_BREAKER;
  }
  return eventActor === undefined ? undefined : pauserOfActor(eventActor);
}

/** What the model should do about a paused operation, with the exact call where one is due. */
export function pausedAdvice(by: PausedBy | undefined, operationId: string, reason?: string | null): string {
  const resume = `{"action":"resume","operation_id":"${operationId}"}`;
  switch (by?.kind) {
    case 'operator':
      return `Operator ${by.name} paused it: ask the user before resuming it, and only if they agree call ${resume}.`;
    case 'circuit_breaker':
      return `The circuit breaker paused it${reason ? ` (${reason})` : ''}. Check the failures with {"action":"get","operation_id":"${operationId}"} and fix the cause before ${resume}.`;
    case 'assistant':
      return `You paused it. To continue: ${resume}.`;
    case 'newer_operation':
      return `A newer operation paused it. To continue: ${resume}.`;
    default:
      return `It is paused${by?.name ? ` by ${by.name}` : ''}. To continue: ${resume}.`;
  }
}
