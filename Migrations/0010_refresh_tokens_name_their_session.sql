-- Refresh tokens name their session (issue 9; decision 0027).
--
-- Every sign-in inserted its refresh token's hash into a unique index over all sessions: a
-- random leaf page per sign-in, in an index that outgrows memory as sessions accumulate. A
-- token now carries its session id, so the session is found by its primary key and the token
-- checked against the stored hash. Tokens issued before carry no id: the sessions holding one
-- are marked (every existing row; the default applies without rewriting the table), and only
-- they stay indexed by hash, until their families end. New sessions are not marked.
ALTER TABLE sessions ADD COLUMN refresh_token_legacy boolean NOT NULL DEFAULT true;
ALTER TABLE sessions ALTER COLUMN refresh_token_legacy SET DEFAULT false;
DROP INDEX sessions_refresh_token_idx;
CREATE UNIQUE INDEX sessions_legacy_refresh_token_idx ON sessions (refresh_token_hash) WHERE refresh_token_legacy;
