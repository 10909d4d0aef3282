-- Item ids compare byte by byte: COLLATE "C" on both columns that hold them.
--
-- An id is an opaque key: opspad only asks whether two are equal (`update` by id, a repeated id
-- refused at create, a kept failure found again), never how they sort. Equality is the same
-- under the database's default collation whenever that collation is deterministic (every
-- collation a database can default to), so nothing any statement answers changes. What changes is
-- the cost of a comparison: under "C" the unique (operation_id, item_id) index compares with
-- memcmp; under a libc collation (C.UTF-8, en_US.UTF-8, …) each comparison copies both strings
-- and calls strcoll. A create writes one entry per id into that index, and a profile of COPY of
-- 1,000,000 ids into the item table (perf, cpu-clock, the backend alone) had strcoll and its
-- copies at about a tenth of the backend's time under C.UTF-8; under "C" they are gone.
--
-- The indexes on the columns are rebuilt (the table is not rewritten): the upgrade holds the
-- tables' locks for as long as that takes.
--
-- Changing a column's collation also drops its statistics, and nothing brings them back soon
-- (autovacuum's analyze waits for a tenth of the table to change). Without them the planner
-- guesses how many rows `item_id = ANY($2)` matches, and a report of 100 ids on a 50,000-item
-- operation walked the operation's primary key instead of probing the id index (9.3 ms against
-- 0.6 ms, growing with the operation). The column is analyzed again here, from the usual sample.
ALTER TABLE "assistant_operation_item" ALTER COLUMN "item_id" TYPE varchar(512) COLLATE "C";--> statement-breakpoint
ALTER TABLE "assistant_operation_kept_failure" ALTER COLUMN "item_id" TYPE varchar(512) COLLATE "C";--> statement-breakpoint
ANALYZE "assistant_operation_item" ("item_id");--> statement-breakpoint
ANALYZE "assistant_operation_kept_failure" ("item_id");
