-- An account's email as a stored lowercase column (decision 0054).
--
-- The sign-in statement finds accounts by email (auto-link by a verified email, and the
-- possible-duplicate flag) case-insensitively. It compared lower(email) = lower($7) through the
-- expression index on (tenant_id, lower(email)). Under row-level security, PostgreSQL may use a
-- condition as an index condition only when its functions are leakproof, and lower() is not:
-- the index then served tenant_id alone, and the lookup read every account of the tenant
-- (measured: 3,152 buffers a sign-in at 3,000 accounts, sign-ins at 40 % of their rate). The
-- comparison of a column to a value (email_key = lower($7)) is leakproof, so the index serves
-- both columns with or without the policies. Adding a stored column rewrites the table once.
ALTER TABLE accounts ADD COLUMN email_key text GENERATED ALWAYS AS (lower(email)) STORED;
CREATE INDEX accounts_email_key_idx ON accounts (tenant_id, email_key) WHERE email IS NOT NULL;
DROP INDEX accounts_email_idx;
