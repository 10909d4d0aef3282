-- Item ids compare byte by byte (collation "C"), in the items and in the kept failures.
--
-- The unique (operation, item) index is most of a create's cost: Postgres alone copies a million
-- rows into the item table in 1.05 s without it and 2.2 s with it. Under the database's default
-- collation (C.UTF-8 here, a locale elsewhere) each comparison of two ids goes through the C
-- library's strcoll; under "C" it is a memcmp: the same COPY takes 1.8 s (scripted \copy of
-- 1,000,000 rows, fillfactor 25, after a CHECKPOINT, best of two). A worker's record finds its
-- items by id through the same index.
--
-- What ids mean does not change: equality under any deterministic collation is byte equality, so
-- the ids the index accepts and refuses stay the same, and nothing orders items by id (batches,
-- pages and cursors follow the ordinal). Changing a column's collation rebuilds its indexes, not
-- the table: on a large store the migration holds these two tables while the indexes rebuild.
ALTER TABLE "assistant_operation_item" ALTER COLUMN "item_id" TYPE varchar(512) COLLATE "C";--> statement-breakpoint
ALTER TABLE "assistant_operation_kept_failure" ALTER COLUMN "item_id" TYPE varchar(512) COLLATE "C";
