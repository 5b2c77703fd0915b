-- Webhooks: each tenant's events delivered to the product backend (issue 23 §5; decision 0044).
--
-- One webhook per tenant. Its signing secret is sealed under the tenant. The dispatcher follows
-- the events outbox in commit order from the webhook's cursor (the same order and the same
-- "older than every running transaction" rule as GET /v1/events) and writes one delivery per
-- event the webhook takes; the cursor moves in the same transaction, so an event gets exactly
-- one delivery row however many instances dispatch.
CREATE TABLE webhooks (
    tenant_id       uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    url             text NOT NULL,
    -- NULL: every event type.
    event_types     text[],
    secret_sealed   bytea NOT NULL CHECK (octet_length(secret_sealed) > 0),
    enabled         boolean NOT NULL DEFAULT true,
    cursor_tx       xid8 NOT NULL,
    cursor_id       bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- One delivery per event the tenant's webhook takes. Pending deliveries of one account go out
-- in (event_tx, event_id) order: a delivery is taken only when no earlier one of its account is
-- still pending (being sent, or waiting for its retry).
CREATE TABLE webhook_deliveries (
    event_id         bigint PRIMARY KEY REFERENCES events_outbox (id) ON DELETE CASCADE,
    tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    account_id       uuid,
    event_tx         xid8 NOT NULL,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_status      integer,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_account_order_idx ON webhook_deliveries (tenant_id, account_id, event_tx, event_id)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_tenant_status_idx ON webhook_deliveries (tenant_id, status, event_id);
