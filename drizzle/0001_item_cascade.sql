-- Deleting operations deletes their items (the cascade a foreign key would give), in one
-- statement per deleting statement. Items carry no foreign key: its per-row check made bulk
-- inserts of a million items three times slower. See src/store/schema.ts.
CREATE FUNCTION opspad_delete_operation_items() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM assistant_operation_item i USING deleted_operations d WHERE i.operation_id = d.id;
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER trg_assistant_operation_delete_items
AFTER DELETE ON assistant_operation
REFERENCING OLD TABLE AS deleted_operations
FOR EACH STATEMENT EXECUTE FUNCTION opspad_delete_operation_items();
