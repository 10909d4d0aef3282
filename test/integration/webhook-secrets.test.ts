/**
 * Organization webhook secrets in the store, on both engines: an organization that predates them
 * gets one on first use (once, however many workers ask at the same time), rotation keeps the
 * previous secret signing until its grace ends, and no more than three secrets ever sign at once.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KeyCommand, keyCommandViaLocalControl, listenLocalControl } from '../../src/cli/local-control.ts';
import {
  createApiKey,
  MAX_SIGNING_SECRETS,
  type OpspadDatabase,
  webhookSecretOf,
  webhookSigningSecrets,
} from '../../src/store/index.ts';
import { ENGINES, openTestDatabase } from '../helpers/harness.ts';

describe.each(ENGINES)('webhook secrets (%s)', (engine) => {
  let db: OpspadDatabase;
  beforeAll(async () => {
    db = await openTestDatabase(engine);
  });
  afterAll(async () => {
    await db.close();
  });

  async function organizationWithoutSecret(): Promise<{ id: string; name: string }> {
    const name = `legacy-${randomUUID()}`;
    const [row] = await db.query<{ id: string }>('INSERT INTO organization (name) VALUES ($1) RETURNING id', [name]);
    return { id: row?.id ?? '', name };
  }

  it('creates the secret with the organization, and keeps it when another key is made', async () => {
    const name = `org-${randomUUID()}`;
    const first = await createApiKey(db, name);
    const [secret] = await webhookSigningSecrets(db, first.organization_id);
    expect(secret).toMatch(/^whsec_/);
    await createApiKey(db, name);
    expect(await webhookSigningSecrets(db, first.organization_id)).toEqual([secret]);
  });

  it('gives an organization that predates secrets exactly one, even to concurrent first readers', async () => {
    const org = await organizationWithoutSecret();
    const answers = await Promise.all(Array.from({ length: 8 }, () => webhookSigningSecrets(db, org.id)));
    const [first] = answers;
    expect(first).toHaveLength(1);
    expect(answers.every((answer) => answer[0] === first?.[0])).toBe(true);
    const [count] = await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM organization_webhook_secret WHERE organization_id = $1',
      [org.id],
    );
    expect(count?.n).toBe(1);
  });

  it('rotates: the new secret first, the previous one until its grace ends, at most three signing', async () => {
    const org = await organizationWithoutSecret();
    const original = await webhookSecretOf(db, org.name, { rotate: false, graceMs: 0 });
    const rotated = await webhookSecretOf(db, org.name, { rotate: true, graceMs: 3_600_000 });
    expect(await webhookSigningSecrets(db, org.id)).toEqual([rotated?.secret, original?.secret]);

    for (let i = 0; i < 4; i++) {
      await webhookSecretOf(db, org.name, { rotate: true, graceMs: 3_600_000 });
    }
    const signing = await webhookSigningSecrets(db, org.id);
    expect(signing).toHaveLength(MAX_SIGNING_SECRETS);
    expect(signing).not.toContain(original?.secret);

    // A rotation without grace retires the old secret at once.
    const now = await webhookSecretOf(db, org.name, { rotate: true, graceMs: 0 });
    const after = await webhookSigningSecrets(db, org.id);
    expect(after[0]).toBe(now?.secret);
    expect(after).not.toContain(signing[0]);
  });

  it('answers null for an organization that does not exist, creating nothing', async () => {
    expect(await webhookSecretOf(db, `nobody-${randomUUID()}`, { rotate: true, graceMs: 1000 })).toBeNull();
  });
});

describe('webhook secrets through the control socket (the CLI beside a service on the embedded database)', () => {
  it('shows and rotates a secret in the process that holds the database', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'opspad-control-'));
    const db = await openTestDatabase('pglite');
    const control = await listenLocalControl(dataDir, db);
    try {
      await createApiKey(db, 'acme');
      const command = { op: 'webhook_secret', org: 'acme', rotate: false, grace_ms: 60_000 } as const;
      const shown = (await keyCommandViaLocalControl(dataDir, command))?.result as { secret: string };
      expect(shown.secret).toMatch(/^whsec_/);
      const rotated = (await keyCommandViaLocalControl(dataDir, { ...command, rotate: true }))?.result as {
        secret: string;
        previous: { expires_at: string }[];
      };
      expect(rotated.secret).not.toBe(shown.secret);
      expect(rotated.previous).toHaveLength(1);
      await expect(
        keyCommandViaLocalControl(dataDir, { ...command, grace_ms: -1 } as unknown as KeyCommand),
      ).rejects.toThrow(/refused/);
    } finally {
      await new Promise((resolve) => control.close(resolve));
      await db.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
