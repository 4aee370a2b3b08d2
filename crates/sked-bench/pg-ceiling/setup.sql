-- The barest PostgreSQL queue: one table, a partial index to claim from and one to complete
-- by. None of sked's model: no jobs, no message table, no fencing token, no attempts, no
-- tenants' turns, no priority aging. 40,000 jobs ready at once.
DROP TABLE IF EXISTS q;
CREATE TABLE q (
    id bigserial PRIMARY KEY,
    state smallint NOT NULL DEFAULT 0,
    priority int NOT NULL DEFAULT 0,
    run_at timestamptz NOT NULL DEFAULT now(),
    attempt int NOT NULL DEFAULT 0,
    locked_by int,
    finished_at timestamptz,
    args jsonb
);
CREATE INDEX q_ready ON q (priority, run_at, id) WHERE state = 0;
CREATE INDEX q_running ON q (locked_by) WHERE state = 1;
INSERT INTO q (args) SELECT '{"x": 1}'::jsonb FROM generate_series(1, 40000);
VACUUM ANALYZE q;
