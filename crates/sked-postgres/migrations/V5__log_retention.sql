-- Log retention (src/log_retention.rs): lines past the retention period are found by their
-- instant and deleted a bounded batch at a time, so `ts` is indexed. Built once, when a
-- process of this version first starts: on a large log_lines table the build holds up log
-- inserts for its duration (refinery runs each migration in a transaction, where CREATE INDEX
-- CONCURRENTLY cannot run).
CREATE INDEX log_lines_ts ON log_lines (ts);
