-- A refresh rotation updates its session in place (decision 0095).
--
-- PostgreSQL updates a row in place (a heap-only tuple, no new entry in any index) only when
-- no column an index names changes value, the columns of a partial index's predicate included,
-- and only when the row's page has room for the new version. Every rotation writes the
-- successor's hash into `refresh_token_hash`, and `sessions_legacy_refresh_token_idx`
-- (migration 0010) named that column as its key: so no rotation was ever in place, and each
-- wrote a new entry into the key and the account's index of `sessions`. The index now names
-- a stored copy of the hash that is set only on the sessions it holds (those of tokens issued
-- before migration 0010), null on every other, so a rotation of a token that names its session
-- changes no column an index names. The index holds the same rows as before.
--
-- And a session is a row that is updated after it is written (each rotation, a revocation), so
-- its pages keep a tenth free for the new versions, as identities' and accounts' keep a fifth
-- (migration 0002). Set before the column is added, so the rewrite below packs the existing
-- sessions that way too.
ALTER TABLE sessions SET (fillfactor = 90);

ALTER TABLE sessions
    ADD COLUMN legacy_refresh_token_hash bytea
        GENERATED ALWAYS AS (CASE WHEN refresh_token_legacy THEN refresh_token_hash END) STORED;

DROP INDEX sessions_legacy_refresh_token_idx;
CREATE UNIQUE INDEX sessions_legacy_refresh_token_idx ON sessions (legacy_refresh_token_hash) WHERE refresh_token_legacy;
