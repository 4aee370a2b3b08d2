-- The schema's first version: only the marker that this database is sked's. The store's,
-- the queue's and the logs' tables come in the migrations that follow.
CREATE TABLE sked_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO sked_meta (key, value) VALUES ('application', 'sked');
