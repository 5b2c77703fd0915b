-- Deleting an identity without reading every session (issue 23; decision 0041).
--
-- sessions.identity_id referenced identities (id) ON DELETE SET NULL. Since migration 0011 no
-- index of sessions leads with identity_id (one index of an account's sessions serves sign-in),
-- so PostgreSQL's own SET NULL read the whole sessions table for every identity deleted: an
-- unlink, an account deletion, Apple's consent-revoked and account-delete. The reference now
-- goes through the account, (account_id, identity_id) → identities (account_id, id), which the
-- account's sessions index serves; a session's identity still cannot name a missing identity,
-- and deleting one still empties the sessions' identity_id (only that column).
CREATE UNIQUE INDEX identities_account_id_idx ON identities (account_id, id);
ALTER TABLE sessions DROP CONSTRAINT sessions_identity_id_fkey;
ALTER TABLE sessions ADD CONSTRAINT sessions_account_identity_fkey
    FOREIGN KEY (account_id, identity_id) REFERENCES identities (account_id, id) ON DELETE SET NULL (identity_id);
