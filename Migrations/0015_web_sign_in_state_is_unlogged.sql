-- A web sign-in's state and its broker code are unlogged (issue 22; decision 0039).
--
-- Both live minutes at most (a state 10 minutes, a code 60 seconds), are single use, and stand
-- for a browser on its way through a sign-in: nothing of the person's account is in them that
-- is not written, durably, when the code is exchanged. Unlogged, they cost no write-ahead log
-- and a callback's commit does not wait for a disk flush. PostgreSQL empties unlogged tables
-- after a crash (and standbys do not have them): the sign-ins under way then fail closed (an
-- unknown state, an unknown code) and the person signs in again.
--
-- The references to tenants go: checking one locks the tenant's row, and that lock is written
-- to the log, which would make every callback's commit wait for the flush again. Tenants are
-- never deleted, and a row outlives nothing: expired ones are swept every minute.
ALTER TABLE web_sign_in_states DROP CONSTRAINT web_sign_in_states_tenant_id_fkey;
ALTER TABLE web_sign_in_codes DROP CONSTRAINT web_sign_in_codes_tenant_id_fkey;
ALTER TABLE web_sign_in_states SET UNLOGGED;
ALTER TABLE web_sign_in_codes SET UNLOGGED;

-- The provider scope the identity will have (Apple: the Services ID's team), known when the
-- sign-in starts: the callback reads the state and the status of the account of the id token's
-- subject in one statement, before a code is redeemed (decision 0039).
ALTER TABLE web_sign_in_states ADD COLUMN provider_scope text;
