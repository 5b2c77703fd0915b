-- Sign-in stamps read from the sessions (decision 0013).
--
-- A returning sign-in that brings nothing new writes only its session; an identity's last
-- sign-in is then the start of its latest session (or its stored stamp, when later). The
-- identity index on sessions covered live sessions only; it now covers every session, with
-- the start time, so that maximum is one index probe. It still serves ON DELETE SET NULL from
-- identities. Sign-ins insert the same number of index entries as before.
DROP INDEX sessions_identity_idx;
CREATE INDEX sessions_identity_created_idx ON sessions (identity_id, created_at);
