-- Plan-safe indexes (decision 0014).
--
-- The sign-in and rotation statements are prepared once per connection and run on generic
-- plans, planned while the tables were nearly empty and kept until statistics change. With
-- tiny tables every index looks equally cheap, and PostgreSQL picked these two for lookups
-- they do not key: `identities_account_idx (tenant_id, account_id)` for an identity lookup by
-- its unique key (scanning the whole tenant through the leading tenant_id), and the partial
-- `sessions_account_idx ... WHERE revoked_at IS NULL` as a full scan for a session lookup by its
-- refresh token (its predicate is implied by the rotation's `revoked_at IS NULL`). Keyed by
-- account alone and without a predicate, neither index offers a path to a lookup that does not
-- bind an account id. The tenant of these rows is still checked in every statement.
DROP INDEX identities_account_idx;
CREATE INDEX identities_account_idx ON identities (account_id);
DROP INDEX sessions_account_idx;
CREATE INDEX sessions_account_idx ON sessions (account_id);

-- The same for Apple clients: `apple_clients_group_idx (tenant_id, group_id)` served a client
-- lookup by (tenant_id, client_id) through its leading tenant_id. Clients of a group are found by
-- the group alone.
DROP INDEX apple_clients_group_idx;
CREATE INDEX apple_clients_group_idx ON apple_clients (group_id);
