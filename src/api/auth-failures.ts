/**
 * Failed sign-ins, counted per client address and per presented credential: wrong API keys on
 * /v1 and /mcp, wrong operator passwords on the operator pages. Only presented credentials
 * count: a request without any (a browser asking for the sign-in prompt) is answered 401 and
 * costs nothing. The two surfaces count apart.
 *
 * A valid credential is never refused for its address's failures: behind a shared NAT or a
 * proxy not named in OPSPAD_TRUST_PROXY, one client sending wrong keys would otherwise lock
 * every key of that address out. So a credential is checked whatever its address's count, and
 * past OPSPAD_AUTH_FAILURE_LIMIT a *wrong* one is answered 429 with Retry-After instead of 401.
 * What bounds guessing:
 * - API keys: 256 random bits, so guessing is hopeless and the bound is on cost. Checking one
 *   is a hash lookup, as cheap as the counters; a credential presented and refused
 *   OPSPAD_AUTH_FAILURE_LIMIT times (a client looping on a revoked key) is refused before its
 *   lookup. It is counted by a digest of the whole credential, not its first characters, which
 *   operators see in `keys list` and which would let anyone lock a valid key out.
 * - The operator password is a person's choice: once its address is past the limit, that address
 *   gets one check per window / limit (3 s at 20/1m), so guesses stay at the configured pace
 *   while the operator, typing the right password, gets in at the latest a few seconds later.
 *
 * The address is `req.ip`: the connection's, unless OPSPAD_TRUST_PROXY names the proxies allowed
 * to state it. Counts live with the queue backend (Redis, or a table of the Postgres queue schema:
 * shared by every API process); if they do not answer, sign-ins are checked as usual.
 */
import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import { AppError } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
import type { WindowCounter } from '../queue/backend.ts';
import { throttledWarning, type Window, windowAt } from './window-counter.ts';

export type AuthSurface = 'api' | 'operator';

/** What the limiter knew before the check: whether the address is past its failures. */
export interface SignInGate {
  addressBlocked: boolean;
}

export interface AuthFailureLimiter {
  /**
   * Before `credential` is checked: throws 429 (and sets Retry-After) when it may not be checked
   * now, else says whether its address is past its failures.
   */
  beforeCheck(surface: AuthSurface, req: Request, res: Response, credential: string): Promise<SignInGate>;
  /** After `credential` was wrong: counts it, and throws 429 when its address was past the limit. */
  afterFailure(surface: AuthSurface, req: Request, res: Response, credential: string, gate: SignInGate): Promise<void>;
}

const credentialDigest = (credential: string) =>
  createHash('sha256').update(credential, 'utf8').digest('base64url').slice(0, 22);

export function authFailureLimiter(counter: WindowCounter, limit: Window, logger: Logger): AuthFailureLimiter {
  const warn = throttledWarning((error) =>
    logger.warn({ err: error }, 'sign-in failure limiter unavailable; checking credentials without it'),
  );
  const addressKey = (surface: AuthSurface, req: Request) =>
    `authfail:${surface}:${req.ip ?? req.socket.remoteAddress ?? 'unknown'}`;
  const credentialKey = (surface: AuthSurface, credential: string) =>
    `authfail:${surface}:credential:${credentialDigest(credential)}`;
  const slotMs = Math.max(1, Math.floor(limit.windowMs / limit.max));

  const refuse = (res: Response, retryAfterSeconds: number, what: string): never => {
    res.set('Retry-After', String(retryAfterSeconds));
    throw new AppError(
      'rate_limited',
      `Too many failed sign-ins ${what}: at most ${limit.max} per ${limit.windowMs} ms (OPSPAD_AUTH_FAILURE_LIMIT). Check the credentials, then retry after ${retryAfterSeconds} s.`,
      { limit: limit.max, window_ms: limit.windowMs, retry_after_seconds: retryAfterSeconds },
    );
  };

  return {
    async beforeCheck(surface, req, res, credential) {
      const { index, retryAfterSeconds } = windowAt(limit, Date.now());
      let gate: SignInGate;
      let credentialFailures = 0;
      try {
        const [address, presented] = await Promise.all([
          counter.read(addressKey(surface, req), index),
          surface === 'api' ? counter.read(credentialKey(surface, credential), index) : 0,
        ]);
        gate = { addressBlocked: address >= limit.max };
        credentialFailures = presented;
      } catch (error) {
        warn(error);
        return { addressBlocked: false };
      }
      if (credentialFailures >= limit.max) {
        refuse(res, retryAfterSeconds, 'with this credential');
      }
      if (gate.addressBlocked && surface === 'operator') {
        const slot = Math.floor(Date.now() / slotMs);
        const checks = await counter
          .increment(`authslot:${surface}:${addressKey(surface, req)}`, slot, slotMs * 2)
          .catch((error: unknown) => {
            warn(error);
            return 1;
          });
        if (checks > 1) {
          refuse(res, Math.max(1, Math.ceil(slotMs / 1000)), 'from this address');
        }
      }
      return gate;
    },
    async afterFailure(surface, req, res, credential, gate) {
      const { index, retryAfterSeconds } = windowAt(limit, Date.now());
      try {
        await Promise.all([
          counter.increment(addressKey(surface, req), index, limit.windowMs * 2),
          surface === 'api' ? counter.increment(credentialKey(surface, credential), index, limit.windowMs * 2) : 0,
        ]);
      } catch (error) {
        warn(error);
      }
      if (gate.addressBlocked) {
        refuse(res, retryAfterSeconds, 'from this address');
      }
    },
  };
}
