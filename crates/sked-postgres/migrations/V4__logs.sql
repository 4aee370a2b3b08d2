-- Attempts' logs (src/logs.rs): one row per line, so any server reads any run's log, also
-- while the attempt is still running.
--
-- `seq` numbers an attempt's lines from 1 in the order they were appended; a reader's cursor
-- is the last `seq` it has seen. The truncation marker is the attempt's last line, with
-- `marker` set (a payload printing the same words is not a marker). Instants are milliseconds
-- since the Unix epoch; identifiers `COLLATE "C"`, as in the store's tables.
CREATE TABLE log_lines (
    tenant   TEXT COLLATE "C" NOT NULL,
    run_id   TEXT COLLATE "C" NOT NULL,
    attempt  BIGINT  NOT NULL,
    seq      BIGINT  NOT NULL,
    ts       BIGINT  NOT NULL,
    stream   TEXT    NOT NULL CHECK (stream IN ('stdout', 'stderr')),
    line     TEXT    NOT NULL,
    marker   BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (tenant, run_id, attempt, seq)
);
