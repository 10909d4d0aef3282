-- Creates the organization's conversation if it does not exist and locks its row to the end of
-- the transaction (conversation-repo.ts ensureConversation, and the create's
-- first step): `ON CONFLICT DO UPDATE … WHERE false` updates nothing but locks the row it
-- conflicts with, once a transaction that has just inserted it commits. Creates, resumes,
-- retries and notes of one conversation take turns here.
CREATE OR REPLACE FUNCTION opspad_lock_conversation(p_conversation uuid, p_organization uuid)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
  INSERT INTO assistant_conversation (id, organization_id) VALUES (p_conversation, p_organization)
  ON CONFLICT (organization_id, id) DO UPDATE SET id = excluded.id WHERE false;
END
$function$;
