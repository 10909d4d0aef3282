/** The egress guard: every outbound call a tenant can aim goes through {@link createEgressGuard}. */
export { type BlockedKind, classifyAddress } from './address-class.ts';
export { type AllowList, AllowListError, allowListProblems, parseAllowList } from './allow-list.ts';
export { EGRESS_ERROR_PHRASES, EgressError, type EgressErrorCode } from './egress-error.ts';
export {
  createEgressGuard,
  type EgressGuard,
  type EgressGuardOptions,
  type EgressRequestInit,
  type EgressResponse,
  type ResolvedAddress,
  type Resolver,
  systemResolver,
} from './guard.ts';
export { type CheckedUrl, checkEgressUrl, MAX_URL_LENGTH, type RefusedUrl, type UrlProblem } from './url-check.ts';
