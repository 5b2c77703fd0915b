-- A repeated web callback is answered as the repeat it is (issue 39 F16, decision 0069).
--
-- A callback claims its state before it redeems the provider's code (`claimed_until`: the end
-- of the claiming request's deadline), and the state stays, answered, until it expires:
-- `code_issued` once a broker code was kept for it (the code is derived from the state, so a
-- repeat hands back the same one while it is unexchanged), or `error`, the one the person was
-- sent back with. A repeat that finds the state claimed waits for the claim's answer instead
-- of redeeming the code a second time (which the provider refuses).
ALTER TABLE web_sign_in_states
    ADD COLUMN claimed_until timestamptz,
    ADD COLUMN code_issued boolean NOT NULL DEFAULT false,
    ADD COLUMN error text CHECK (error ~ '^[a-z0-9_]{1,64}$'),
    ADD CONSTRAINT web_sign_in_states_one_answer CHECK (NOT (code_issued AND error IS NOT NULL));
