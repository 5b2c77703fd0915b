-- A session holds its current refresh token (decision 0012).
--
-- Every sign-in inserted a session row and a refresh-token row: two heap rows, six index
-- entries and three foreign-key checks, most of PostgreSQL's work per sign-in. The session now
-- carries the hash and idle expiry of its one live refresh token; rotation replaces them in
-- place. `refresh_tokens` keeps only spent tokens (used_at set): the ledger that reuse
-- detection and revocation by an old token read.
--
-- No CHECK constraints on the new columns: PostgreSQL reads and prepares every CHECK expression
-- of a table again for each INSERT statement, and the two that fit here (32-byte hash; hash and
-- expiry set together) cost 9 % of the sign-in statement's throughput (pgbench: 15,500 vs
-- 14,260 statements/s). The broker writes both columns together, always from a SHA-256 digest.
ALTER TABLE sessions
    ADD COLUMN refresh_token_hash bytea,
    ADD COLUMN refresh_token_expires_at timestamptz;

-- Each session's live token moves onto the session (the newest, should there be more than one).
UPDATE sessions s SET refresh_token_hash = live.token_hash, refresh_token_expires_at = live.expires_at
FROM (
    SELECT DISTINCT ON (session_id) session_id, tenant_id, token_hash, expires_at
    FROM refresh_tokens
    WHERE used_at IS NULL
    ORDER BY session_id, created_at DESC
) live
WHERE s.id = live.session_id AND s.tenant_id = live.tenant_id;

DELETE FROM refresh_tokens WHERE used_at IS NULL;
ALTER TABLE refresh_tokens ALTER COLUMN used_at SET NOT NULL;

CREATE UNIQUE INDEX sessions_refresh_token_idx ON sessions (refresh_token_hash);
