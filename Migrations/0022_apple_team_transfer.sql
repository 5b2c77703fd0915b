-- Apple team transfer (issue 23 §4; decision 0045).
--
-- The export asks Apple for each Apple identity's `transfer_sub` for the target team and keeps
-- it here, with that team, until the identity is re-keyed onto the target team: by the import
-- (the new `sub` from Apple's exchange) or by the person's first sign-in of the transition
-- window (a token carrying both the new `sub` and the `transfer_sub`).
ALTER TABLE identities ADD COLUMN apple_transfer_sub text, ADD COLUMN apple_transfer_team text;
CREATE UNIQUE INDEX identities_apple_transfer_idx ON identities (tenant_id, apple_transfer_sub)
    WHERE apple_transfer_sub IS NOT NULL;
