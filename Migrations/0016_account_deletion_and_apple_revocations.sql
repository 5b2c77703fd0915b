-- Account deletion with Apple token revocation (issue 23 §2; decision 0040).
--
-- Apple revokes a refresh token only for the client that obtained it (the App ID of a native
-- sign-in, the Services ID of a web one), so an identity keeps that client beside the sealed
-- token. Tokens stored before this migration take the client of the newest session opened
-- through the identity, the best record there is of who obtained them.
ALTER TABLE identities ADD COLUMN provider_token_client_id text;
-- One pass over sessions (no index leads with identity_id since migration 0011).
UPDATE identities i SET provider_token_client_id = newest.client_id
FROM (
    SELECT DISTINCT ON (s.identity_id) s.identity_id, s.tenant_id, s.client_id FROM sessions s
    WHERE s.identity_id IS NOT NULL AND s.client_id IS NOT NULL
    ORDER BY s.identity_id, s.created_at DESC
) newest
WHERE i.id = newest.identity_id AND i.tenant_id = newest.tenant_id AND i.provider_refresh_token_sealed IS NOT NULL;

-- A deleted account is a tombstone: its id, when and why; nothing personal.
ALTER TABLE accounts ADD COLUMN deleted_reason text;

-- Apple revocations to make, one per Apple identity with a stored refresh token of a deleted
-- account. The token is sealed again under this row's id (the identity, whose subject it was
-- sealed under, is gone) and dropped once Apple took it. Workers of every instance take due
-- rows with FOR UPDATE SKIP LOCKED: one instance makes each call.
CREATE TABLE apple_revocations (
    id               uuid PRIMARY KEY,
    tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    account_id       uuid NOT NULL,
    team_id          text NOT NULL,
    client_id        text NOT NULL,
    token_sealed     bytea,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'failed', 'done')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    done_at          timestamptz,
    CHECK ((status = 'done') = (token_sealed IS NULL))
);
CREATE INDEX apple_revocations_due_idx ON apple_revocations (next_attempt_at) WHERE status = 'pending';
CREATE INDEX apple_revocations_tenant_idx ON apple_revocations (tenant_id, created_at);

-- Events name their account, so that deliveries can keep each account's events in order.
ALTER TABLE events_outbox ADD COLUMN account_id uuid;
CREATE INDEX events_outbox_tenant_idx ON events_outbox (tenant_id, id);
