-- The step functions plan their statements once per connection (plan_cache_mode).
--
-- PL/pgSQL caches each statement's plan, but with the default plan_cache_mode a statement
-- whose parameters include an array (the report's ids and reasons) or whose custom plan looks
-- cheaper than the generic one is planned again on every call: in a perf profile of Postgres at
-- batch 100 (two worker processes) planning inside these functions (GetCachedPlan → the planner,
-- CTE and expression rewriting) was about a seventh of the functions' time. Every statement here
-- is a lookup by the operation's key and an ordinal range or the batch's ids, whose generic plans
-- are the custom ones (checked with auto_explain at 1,000,000 items: index scans of the primary
-- key and of the unique (operation, item) index, a few buffers per item). Alternated runs at
-- batch 100: Postgres' CPU per 100,000 items 1.43-1.56 s against 1.57-1.72 s, 64-83k against
-- 64-75k items/s. The setting holds only while a function runs.
ALTER FUNCTION "opspad_lease_step"(uuid, uuid, uuid, text, double precision, integer, integer)
  SET plan_cache_mode = force_generic_plan;--> statement-breakpoint
ALTER FUNCTION "opspad_record_step"(uuid, uuid, uuid, text, text[], text[])
  SET plan_cache_mode = force_generic_plan;--> statement-breakpoint
ALTER FUNCTION "opspad_record_lease_step"(uuid, uuid, uuid, text, text[], text[], double precision, integer, integer)
  SET plan_cache_mode = force_generic_plan;
