-- Events read in the order their transactions committed (issue 23 §5; decision 0042).
--
-- An outbox id is taken when the row is inserted, not when its transaction commits: a reader
-- that pages by id alone can pass an id whose transaction commits a moment later and never see
-- that event. Each row keeps the id of the transaction that wrote it; readers page by
-- (transaction, id) and only over transactions older than every transaction still running
-- (`pg_snapshot_xmin`), so nothing can appear behind the cursor.
ALTER TABLE events_outbox ADD COLUMN tx xid8 NOT NULL DEFAULT pg_current_xact_id();
DROP INDEX events_outbox_tenant_idx;
CREATE INDEX events_outbox_tenant_order_idx ON events_outbox (tenant_id, tx, id);

-- Nothing sets `delivered_at` (deliveries will keep their own state): the partial index of
-- undelivered rows covered every row and was kept up on every insert for no reader.
DROP INDEX events_outbox_pending_idx;
