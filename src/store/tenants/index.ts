/**
 * Tenants: organizations, their API keys (stored as hashes, with a short-lived cache of which
 * hashes authenticate) and webhook signing secrets, the (organization, id) conversations
 * every other table belongs to, and each organization's own provider-limit
 * overrides per handler type and key.
 *
 * Tables: organization, api_key, organization_webhook_secret, assistant_conversation,
 * organization_key_limit.
 *
 * Lock order: the conversation row comes first in every transaction that takes it (creates,
 * resumes, retries and pad writes queue on it; the lock is sql/opspad_lock_conversation.sql, so
 * the create's server-side call takes the same); key and secret writes lock only their own rows.
 */
export * from './approval-policy.ts';
export * from './conversation-repo.ts';
export * from './key-limits.ts';
export * from './organization-repo.ts';
export * from './webhook-secret-repo.ts';
