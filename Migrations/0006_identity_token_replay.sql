-- Identity tokens sign in once per tenant (decision 0021).
--
-- Each session records the replay key of the identity token that opened it: SHA-256 over the
-- tenant, the provider and the token's jti (or the whole token when it has none). A second
-- sign-in with the same token fails on this unique index inside the sign-in statement, so it
-- writes nothing (no account, identity or session) and the broker answers 401 token_replayed.
-- The check holds across broker instances and costs one index entry per sign-in. Sessions
-- outlive the identity tokens that opened them (minutes), so the key is kept as long as needed.
-- Sessions from before this migration have no key.
ALTER TABLE sessions ADD COLUMN identity_token_key bytea;
CREATE UNIQUE INDEX sessions_identity_token_key_idx ON sessions (identity_token_key);
