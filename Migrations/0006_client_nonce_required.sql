-- A nonce per sign-in, required per client (issue 9 §4; decision 0016).
--
-- A client that requires a nonce refuses a sign-in that sends none (400 nonce_required), whether
-- or not the token carries one: an identity token without its nonce is not bound to the
-- sign-in the app started. Clients registered before this migration keep working as they did
-- (false); clients added from now on require it unless the operator says otherwise.
ALTER TABLE apple_clients ADD COLUMN nonce_required boolean NOT NULL DEFAULT false;
ALTER TABLE apple_clients ALTER COLUMN nonce_required SET DEFAULT true;
