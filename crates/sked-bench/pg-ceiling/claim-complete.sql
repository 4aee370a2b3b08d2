-- One client's cycle: claim up to :batch ready jobs (SKIP LOCKED), commit, then complete them.
BEGIN;
WITH c AS (SELECT id FROM q WHERE state = 0 ORDER BY priority, run_at, id LIMIT :batch FOR UPDATE SKIP LOCKED)
UPDATE q SET state = 1, attempt = attempt + 1, locked_by = :client_id FROM c WHERE q.id = c.id;
COMMIT;
UPDATE q SET state = 2, finished_at = now() WHERE state = 1 AND locked_by = :client_id;
