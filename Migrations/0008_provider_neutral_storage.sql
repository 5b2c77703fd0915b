-- Provider-neutral storage (issue 10; decision 0024).
--
-- Identities keep any provider's refresh token (sealed) and the provider's extra attributes
-- (e.g. Google's hosted domain) under neutral names. Apple keeps its team, app-group and client
-- tables; Google and Facebook settings live in one per-tenant shape: one row per tenant and
-- provider, with the platforms it is offered on. The earlier per-platform table was never
-- written by any release, so it is replaced rather than converted.
ALTER TABLE identities RENAME COLUMN apple_refresh_token_sealed TO provider_refresh_token_sealed;
ALTER TABLE identities ADD COLUMN attributes jsonb;

DROP TABLE provider_configs;
CREATE TABLE provider_configs (
    tenant_id          uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    provider           text NOT NULL CHECK (provider IN ('google', 'facebook')),
    platforms          text[] NOT NULL DEFAULT '{}'
                       CHECK (platforms <@ ARRAY['ios', 'android', 'web']::text[]),
    -- Google: the accepted OAuth client ids. Facebook: the one app id.
    client_ids         text[] NOT NULL CHECK (cardinality(client_ids) > 0),
    hosted_domain      text,
    -- Facebook's app secret, sealed with the master key like the .p8 keys.
    secret_sealed      bytea,
    limited_login      boolean NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, provider)
);
