/**
 * Standard Webhooks signing (https://www.standardwebhooks.com), with `node:crypto`:
 * `webhook-signature: v1,<base64 HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")>`,
 * the key being the base64-decoded part of a `whsec_…` secret. Several secrets (during a
 * rotation) give several space-separated signatures; a receiver accepts the request when one
 * matches. Every header value here is ASCII, whatever the item id: the id travels in the body.
 */
import { createHash, createHmac } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/**
 * The `webhook-id` of an item's delivery: the same on every retry (receivers dedupe on it), a
 * new one for a new operation (retry_failed), and ASCII whatever the item id holds.
 */
export function webhookMessageId(operationId: string, itemId: string): string {
  // The operation id is a UUID (no ":"), so "<operation>:<item>" names one pair only.
  return `msg_${createHash('sha256').update(`${operationId}:${itemId}`, 'utf8').digest('hex').slice(0, 32)}`;
}

function keyOf(secret: string): Buffer {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  if (key.length === 0) {
    throw new Error('a webhook secret must hold base64 key bytes after whsec_');
  }
  return key;
}

/** The `webhook-signature` header: one `v1,<base64>` per secret, space-separated. */
export function signWebhook(secrets: readonly string[], id: string, timestamp: number, body: Buffer): string {
  return secrets
    .map((secret) => {
      const hmac = createHmac('sha256', keyOf(secret));
      hmac.update(`${id}.${timestamp}.`, 'utf8');
      hmac.update(body);
      return `v1,${hmac.digest('base64')}`;
    })
    .join(' ');
}
