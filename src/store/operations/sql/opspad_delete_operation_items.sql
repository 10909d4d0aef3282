-- Deleting operations deletes their items (the cascade a foreign key would give), in one
-- statement per deleting statement: items carry no foreign key, whose per-row check makes bulk
-- inserts of items several times slower. The trigger is in the migrations (schema.ts says which).
CREATE OR REPLACE FUNCTION opspad_delete_operation_items()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
  DELETE FROM assistant_operation_item i USING deleted_operations d WHERE i.operation_id = d.id;
  RETURN NULL;
END;
$function$;
