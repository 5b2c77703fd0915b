-- Sign-in on the web (issue 22; decision 0038).
--
-- A web sign-in starts with a state the broker hands to the provider's authorize URL and ends
-- with a broker code the product's backend exchanges once. Neither is stored as itself: a row
-- is found by the SHA-256 of its value, so a copy of the database opens no sign-in. The nonce
-- and the PKCE verifier are derived from the state with a key of the broker's master key and
-- are not stored at all.
CREATE TABLE web_sign_in_states (
    state_hash    bytea PRIMARY KEY CHECK (octet_length(state_hash) = 32),
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    provider      text NOT NULL CHECK (provider ~ '^[a-z][a-z0-9-]{1,31}$'),
    client_id     text NOT NULL,
    redirect_uri  text NOT NULL,
    return_url    text NOT NULL,
    intent        text NOT NULL CHECK (intent IN ('auto', 'sign_in', 'sign_up')),
    caller_state  text,
    expires_at    timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX web_sign_in_states_expiry_idx ON web_sign_in_states (expires_at);

-- A verified web sign-in waiting for its broker code: the identity, sealed (it holds the
-- person's email and, for Apple, the sealed refresh token), bound to its tenant and provider.
CREATE TABLE web_sign_in_codes (
    code_hash     bytea PRIMARY KEY CHECK (octet_length(code_hash) = 32),
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    provider      text NOT NULL CHECK (provider ~ '^[a-z][a-z0-9-]{1,31}$'),
    grant_sealed  bytea NOT NULL,
    expires_at    timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX web_sign_in_codes_expiry_idx ON web_sign_in_codes (expires_at);
