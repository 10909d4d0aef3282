-- opspad_record_step takes a seventh argument, p_complete: a worker's record that leaves nothing
-- to record completes an active operation in the same call, where the worker then completed it
-- in a statement of its own. A change of arguments is a new function: the old one goes here, and
-- the migrator's last step creates the new one from its file
-- (src/store/leases/sql/opspad_record_step.sql).
DROP FUNCTION IF EXISTS "opspad_record_step"(uuid, uuid, uuid, text, text[], text[]);
