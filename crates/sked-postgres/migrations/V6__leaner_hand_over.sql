-- Leaner hand-over (measured in BENCHMARKS.md, PostgreSQL): fewer index entries written per
-- run and message, and the active-job count kept once per statement rather than once per row.

-- The reaper's expired leases are read from `runs_slots` (every RUNNING run, led by the
-- tenant; the partial index holds only running runs, so reading all of it is cheap): one
-- index entry less at every claim.
DROP INDEX runs_leases;

-- A receive always knows the tenant it takes from (the loose scan of `dispatch_by_tenant`
-- finds the queued tenants first), so it walks `dispatch_by_tenant`: one index entry less at
-- every enqueue and every delivery.
DROP INDEX dispatch_receive;

-- `tenant_usage` kept, for updates and deletes, by statement-level triggers over the
-- statement's transition tables: one upsert per tenant a statement changed, where the row
-- triggers of migration 2 made one per row (a firing of 500 one-shot jobs upserted one
-- tenant's row 500 times: 2/3 of its update's time). Inserts keep their row trigger (a job is
-- inserted one statement at a time, where a statement-level trigger costs more than a row's),
-- now only for a row that counts.
DROP TRIGGER jobs_usage_insert ON jobs;
DROP TRIGGER jobs_usage_update ON jobs;
DROP TRIGGER jobs_usage_delete ON jobs;
CREATE TRIGGER jobs_usage_insert AFTER INSERT ON jobs FOR EACH ROW
    WHEN (NEW.state IN ('ACTIVE', 'PAUSED')) EXECUTE FUNCTION jobs_usage();

-- The change the rows an UPDATE or a DELETE wrote make to their tenants' counts: +1 for each
-- new row that counts (ACTIVE or PAUSED), -1 for each old row that did. (An upsert's insert
-- is counted by the row trigger; its update by the UPDATE statement trigger, whose transition
-- tables hold only the rows it updated.)
CREATE FUNCTION jobs_usage_of_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO tenant_usage (tenant, active_jobs)
            SELECT tenant, sum(delta) FROM (
                SELECT tenant, 1 AS delta FROM new_rows WHERE state IN ('ACTIVE', 'PAUSED')
                UNION ALL
                SELECT tenant, -1 FROM old_rows WHERE state IN ('ACTIVE', 'PAUSED')
            ) AS changes GROUP BY tenant HAVING sum(delta) <> 0
            ON CONFLICT (tenant) DO UPDATE SET active_jobs = tenant_usage.active_jobs + excluded.active_jobs;
    ELSE
        INSERT INTO tenant_usage (tenant, active_jobs)
            SELECT tenant, -count(*) FROM old_rows WHERE state IN ('ACTIVE', 'PAUSED') GROUP BY tenant
            ON CONFLICT (tenant) DO UPDATE SET active_jobs = tenant_usage.active_jobs + excluded.active_jobs;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER jobs_usage_update AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_usage_of_statement();
CREATE TRIGGER jobs_usage_delete AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_usage_of_statement();
