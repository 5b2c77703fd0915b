-- One index of an account's sessions (issue 9; decision 0028).
--
-- Every sign-in inserted its session into two indexes keyed by values that cannot be
-- time-ordered: the account's (account_id) and the identity's (identity_id, created_at). Each
-- is a random leaf page per sign-in once the tables outgrow memory. An identity belongs to one
-- account, so one index (account_id, identity_id, created_at) serves both: an account's
-- sessions by its leading column (sign-out, listing), an identity's by the first two (its
-- latest sign-in, revocation on unlink), one insertion per sign-in instead of two.
-- Building it blocks writes to sessions while it runs: seconds for a million sessions.
CREATE INDEX sessions_account_identity_idx ON sessions (account_id, identity_id, created_at);
DROP INDEX sessions_account_idx;
DROP INDEX sessions_identity_created_idx;
