-- Sign-in hot path (decision 0010).
--
-- Identities, sessions and refresh tokens referenced tenants directly. Every sign-in inserts a
-- session and a refresh token, so every sign-in of a tenant key-share-locked that tenant's one
-- row three times over (PostgreSQL's foreign-key check), and concurrent sign-ins turned the lock
-- into shared multixacts. The tenant of these rows is already pinned by their composite keys:
-- identities and sessions reference accounts (tenant_id, id), accounts reference tenants, and
-- refresh tokens cascade from their session. Deleting a tenant still cascades to all of them.
ALTER TABLE identities DROP CONSTRAINT identities_tenant_id_fkey;
ALTER TABLE sessions DROP CONSTRAINT sessions_tenant_id_fkey;
ALTER TABLE refresh_tokens DROP CONSTRAINT refresh_tokens_tenant_id_fkey;

-- Returning sign-ins update identities and accounts in place; leave room on each page so the
-- new row version stays on it (a HOT update touches no index).
ALTER TABLE identities SET (fillfactor = 80);
ALTER TABLE accounts SET (fillfactor = 80);
