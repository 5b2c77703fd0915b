-- A sign-in that keeps Apple's new refresh token updates its identity in place (decision 0093).
--
-- PostgreSQL updates a row in place (a heap-only tuple, no new entry in any index) only when
-- no column an index names changes, the columns of a partial index's predicate included.
-- `identities_credential_check_idx` (migration 0019) named `provider_refresh_token_sealed` in
-- its predicate, and every Apple sign-in with an authorization code stores a newly sealed token:
-- so each such sign-in wrote a new entry into every index of the table. The predicate
-- now names a stored column that says whether a token is held. It keeps its value when the
-- token is replaced, and the index holds the same rows as before.
ALTER TABLE identities
    ADD COLUMN holds_provider_refresh_token boolean NOT NULL
        GENERATED ALWAYS AS (provider_refresh_token_sealed IS NOT NULL) STORED;

DROP INDEX identities_credential_check_idx;
CREATE INDEX identities_credential_check_idx ON identities (credential_check_due_at)
    WHERE provider = 'apple' AND holds_provider_refresh_token;
