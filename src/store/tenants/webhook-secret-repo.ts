/**
 * Each organization's webhook signing secrets, in the Standard Webhooks format (`whsec_` and
 * base64 of 32 random bytes). An organization gets its secret when it is created (see
 * organization-repo.ts); one that predates this table gets it on first use, here, so the
 * migration needs no random-bytes function in SQL (PGlite has no pgcrypto).
 *
 * Rotation keeps the previous secret signing until `now() + grace`: requests then carry both
 * signatures, and a receiver switches to the new secret whenever it likes within that time. At
 * most {@link MAX_SIGNING_SECRETS} secrets sign at once; rotating faster than the grace period
 * retires the oldest ones at once.
 */
import { randomBytes } from 'node:crypto';
import type { Database, Queryable } from '../db/db.ts';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
/** The current secret and up to two previous ones still in their grace period. */
export const MAX_SIGNING_SECRETS = 3;

/** A fresh `whsec_…` secret: 32 random bytes (the spec asks for 24 to 64). */
export function newWebhookSecret(): string {
  return `${WEBHOOK_SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/** Gives the organization a current secret unless it has one (a no-op on a race). */
export async function ensureWebhookSecret(db: Queryable, organizationId: string): Promise<void> {
  await db.query(
    `INSERT INTO organization_webhook_secret (organization_id, secret) VALUES ($1, $2)
     ON CONFLICT (organization_id) WHERE expires_at IS NULL DO NOTHING`,
    [organizationId, newWebhookSecret()],
  );
}

const SIGNING_SECRETS_SQL = `SELECT secret FROM organization_webhook_secret
   WHERE organization_id = $1 AND (expires_at IS NULL OR expires_at > now())
   ORDER BY expires_at DESC NULLS FIRST, created_at DESC`;

/** The secrets that sign the organization's webhooks now: the current one first. */
export async function webhookSigningSecrets(db: Queryable, organizationId: string): Promise<string[]> {
  let rows = await db.query<{ secret: string }>(SIGNING_SECRETS_SQL, [organizationId]);
  if (rows.length === 0) {
    await ensureWebhookSecret(db, organizationId);
    rows = await db.query<{ secret: string }>(SIGNING_SECRETS_SQL, [organizationId]);
  }
  return rows.map((row) => row.secret);
}

export interface WebhookSecretInfo {
  organization_id: string;
  organization: string;
  /** The current secret, which receivers verify with. */
  secret: string;
  created_at: Date;
  /** Earlier secrets that still sign until `expires_at` (their values are not shown again). */
  previous: { created_at: Date; expires_at: Date }[];
}

/**
 * Shows (and with `rotate`, first replaces) the webhook secret of the organization named
 * `organizationName`; null when there is no such organization. The organization row is locked
 * so that two rotations queue up instead of both demoting the same secret.
 */
export async function webhookSecretOf(
  db: Database,
  organizationName: string,
  options: { rotate: boolean; graceMs: number },
): Promise<WebhookSecretInfo | null> {
  return db.transaction(async (tx) => {
    const [org] = await tx.query<{ id: string; name: string }>(
      'SELECT id, name FROM organization WHERE name = $1 FOR UPDATE',
      [organizationName],
    );
    if (!org) {
      return null;
    }
    await tx.query('DELETE FROM organization_webhook_secret WHERE organization_id = $1 AND expires_at <= now()', [
      org.id,
    ]);
    if (options.rotate) {
      await tx.query(
        `UPDATE organization_webhook_secret SET expires_at = now() + $2::bigint * interval '1 millisecond'
         WHERE organization_id = $1 AND expires_at IS NULL`,
        [org.id, Math.max(0, Math.round(options.graceMs))],
      );
      // Beyond the cap the oldest previous secrets stop signing now.
      await tx.query(
        `DELETE FROM organization_webhook_secret WHERE id IN (
           SELECT id FROM organization_webhook_secret
           WHERE organization_id = $1 AND expires_at IS NOT NULL
           ORDER BY expires_at DESC, created_at DESC OFFSET $2)`,
        [org.id, MAX_SIGNING_SECRETS - 1],
      );
    }
    await ensureWebhookSecret(tx, org.id);
    const rows = await tx.query<{ secret: string; created_at: Date; expires_at: Date | null }>(
      `SELECT secret, created_at, expires_at FROM organization_webhook_secret
       WHERE organization_id = $1 ORDER BY expires_at DESC NULLS FIRST, created_at DESC`,
      [org.id],
    );
    const [current, ...previous] = rows;
    if (!current || current.expires_at !== null) {
      throw new Error(`organization ${org.name} has no current webhook secret after creating one`);
    }
    return {
      organization_id: org.id,
      organization: org.name,
      secret: current.secret,
      created_at: current.created_at,
      previous: previous.map((row) => ({ created_at: row.created_at, expires_at: row.expires_at as Date })),
    };
  });
}
