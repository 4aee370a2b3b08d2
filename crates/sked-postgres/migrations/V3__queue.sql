-- The dispatch queue (src/queue.rs): one row per (tenant, run) to hand to a worker.
--
-- Instants are milliseconds since the Unix epoch (BIGINT), as the queue's arithmetic is:
-- `rank = not_before - least(priority, 9) * 5000` (sked-core's `dispatch_rank`, priority
-- with aging). A message is receivable once `visible_at <= now`; a delivery sets `receipt`
-- ("<seq>.<receive_count>", unique for ever: `seq` is never reused and the count only grows)
-- and pushes `visible_at` to the end of its visibility lease.
CREATE TABLE dispatch (
    seq            BIGINT   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant         TEXT     NOT NULL,
    run_id         TEXT     NOT NULL,
    priority       SMALLINT NOT NULL,
    not_before     BIGINT   NOT NULL,
    rank           BIGINT   NOT NULL,
    visible_at     BIGINT   NOT NULL,
    -- The current delivery's receipt; NULL while waiting (or parked).
    receipt        TEXT,
    receive_count  INTEGER  NOT NULL DEFAULT 0,
    -- The concurrency key the message waits on (set aside until a run holding it ends).
    parked_on      TEXT,
    UNIQUE (tenant, run_id)
);
-- Serving order of one tenant's queue, or of a queue with one tenant: receive walks it and
-- stops after `max` visible rows (visible_at is in the index so invisible rows are skipped
-- without visiting the table).
CREATE INDEX dispatch_receive ON dispatch (rank, seq, visible_at);
-- Each tenant's serving order, and the list of tenants with messages (a loose index scan).
CREATE INDEX dispatch_by_tenant ON dispatch (tenant, rank, seq, visible_at);
-- The earliest instant a message becomes visible, for a waiting receive's clock.
CREATE INDEX dispatch_visible ON dispatch (visible_at);
-- Messages parked on a full concurrency key, in serving order.
CREATE INDEX dispatch_parked ON dispatch (tenant, parked_on, rank, seq) WHERE parked_on IS NOT NULL;

-- Per tenant, the turn it was last served in (sked-core's `fairness`): tenants take turns.
CREATE TABLE dispatch_turns (
    tenant  TEXT   PRIMARY KEY,
    turn    BIGINT NOT NULL
);
