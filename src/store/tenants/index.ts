/**
 * Tenants: organizations, their API keys (stored as hashes, with a short-lived cache of which
 * hashes authenticate) and webhook signing secrets, and the (organization, id) conversations
 * every other table belongs to.
 *
 * Tables: organization, api_key, organization_webhook_secret, assistant_conversation.
 *
 * Lock order: the conversation row comes first in every transaction that takes it (creates,
 * resumes, retries and pad writes queue on it); key and secret writes lock only their own rows.
 */
export * from './approval-policy.ts';
export * from './conversation-repo.ts';
export * from './organization-repo.ts';
export * from './webhook-secret-repo.ts';
