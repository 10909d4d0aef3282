/**
 * Why an outbound call failed, as a fixed phrase. Nothing the target sent (body, headers, a
 * redirect's location) and nothing from the URL beyond what the caller chooses to add ever goes
 * into these messages: they end up in failure reasons a tenant reads.
 */

export const EGRESS_ERROR_PHRASES = {
  address_not_allowed: 'address not allowed',
  invalid_url: 'URL not usable (an http(s) URL without user name or password)',
  host_not_found: 'host not found (DNS lookup failed)',
  connection_refused: 'connection refused',
  connection_reset: 'connection reset by the receiver',
  unreachable: 'host unreachable',
  timeout: 'timed out',
  tls: 'TLS handshake failed (certificate or protocol)',
  bad_response: 'the receiver did not answer with valid HTTP',
  network: 'network error',
} as const;

export type EgressErrorCode = keyof typeof EGRESS_ERROR_PHRASES;

export class EgressError extends Error {
  override readonly name = 'EgressError';
  constructor(
    readonly code: EgressErrorCode,
    options?: ErrorOptions,
  ) {
    super(EGRESS_ERROR_PHRASES[code], options);
  }
}

function codeOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) {
    return undefined;
  }
  const { code } = error as { code?: unknown };
  if (typeof code === 'string') {
    return code;
  }
  // Happy-eyeballs connects to several addresses and reports an AggregateError.
  return error instanceof AggregateError ? codeOf(error.errors[0]) : undefined;
}

const BY_CODE: Readonly<Record<string, EgressErrorCode>> = {
  ENOTFOUND: 'host_not_found',
  EAI_AGAIN: 'host_not_found',
  EAI_NODATA: 'host_not_found',
  EAI_NONAME: 'host_not_found',
  ECONNREFUSED: 'connection_refused',
  ECONNRESET: 'connection_reset',
  EPIPE: 'connection_reset',
  EHOSTUNREACH: 'unreachable',
  ENETUNREACH: 'unreachable',
  ETIMEDOUT: 'timeout',
  // undici's own errors (the HTTP client the guard sends through).
  UND_ERR_SOCKET: 'connection_reset',
  UND_ERR_CLOSED: 'connection_reset',
  UND_ERR_CONNECT_TIMEOUT: 'timeout',
  UND_ERR_HEADERS_TIMEOUT: 'timeout',
  UND_ERR_BODY_TIMEOUT: 'timeout',
  UND_ERR_HEADERS_OVERFLOW: 'bad_response',
  UND_ERR_RES_CONTENT_LENGTH_MISMATCH: 'bad_response',
};

/** Maps a socket, DNS, TLS or HTTP parser error onto an {@link EgressError}, keeping it as cause. */
export function toEgressError(error: unknown): EgressError {
  if (error instanceof EgressError) {
    return error;
  }
  const code = codeOf(error) ?? '';
  let kind: EgressErrorCode = Object.hasOwn(BY_CODE, code) ? (BY_CODE[code] as EgressErrorCode) : 'network';
  if (kind === 'network' && /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_/.test(code)) {
    kind = 'tls';
  } else if (kind === 'network' && code.startsWith('HPE_')) {
    kind = 'bad_response';
  }
  return new EgressError(kind, { cause: error });
}
