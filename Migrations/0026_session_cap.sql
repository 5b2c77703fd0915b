-- A cap on open sessions per account (issue 25, "Public edge"; decision 0051).
--
-- A sign-in that would leave an account with more open sessions (not revoked, not past their
-- absolute expiry) than its tenant's cap revokes the oldest in the same statement, with
-- `revoke_reason = 'session_limit'` (a `session.revoked` security event). Default 100; set with
-- `broker tenant set --tenant T --max-sessions-per-account N`.
ALTER TABLE tenants
    ADD COLUMN max_sessions_per_account integer NOT NULL DEFAULT 100 CHECK (max_sessions_per_account BETWEEN 1 AND 10000);
