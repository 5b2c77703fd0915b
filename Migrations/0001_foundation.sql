-- IdentityBroker data model (DESIGN.md "Domain model").
-- Every tenant-owned row carries tenant_id; every query filters by it.

CREATE TABLE tenants (
    id                        uuid PRIMARY KEY,
    slug                      text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{1,38}[a-z0-9]$'),
    display_name              text NOT NULL,
    status                    text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
    access_token_ttl          integer NOT NULL DEFAULT 900 CHECK (access_token_ttl BETWEEN 60 AND 86400),
    refresh_token_absolute_ttl integer NOT NULL DEFAULT 5184000 CHECK (refresh_token_absolute_ttl > 0),
    refresh_token_idle_ttl    integer NOT NULL DEFAULT 2592000 CHECK (refresh_token_idle_ttl > 0),
    audiences                 text[] NOT NULL DEFAULT '{}',
    auto_link_verified_email  boolean NOT NULL DEFAULT false,
    key_activation_delay      integer NOT NULL DEFAULT 600 CHECK (key_activation_delay >= 0),
    policy_mode               text NOT NULL DEFAULT 'privacy-equivalent'
                              CHECK (policy_mode IN ('apple-required', 'privacy-equivalent')),
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    id            uuid PRIMARY KEY,
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name          text NOT NULL,
    prefix        text NOT NULL,
    key_hash      bytea NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    scopes        text[] NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz
);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id, created_at);

CREATE TABLE signing_keys (
    id                  uuid PRIMARY KEY,
    tenant_id           uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kid                 text NOT NULL,
    algorithm           text NOT NULL DEFAULT 'ES256' CHECK (algorithm = 'ES256'),
    public_key          bytea NOT NULL,
    private_key_sealed  bytea NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    activates_at        timestamptz NOT NULL,
    retired_at          timestamptz,
    UNIQUE (tenant_id, kid)
);

CREATE TABLE apple_teams (
    id                  uuid PRIMARY KEY,
    tenant_id           uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    team_id             text NOT NULL CHECK (team_id ~ '^[A-Z0-9]{10}$'),
    key_id              text CHECK (key_id ~ '^[A-Z0-9]{10}$'),
    private_key_sealed  bytea,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, team_id)
);

CREATE TABLE apple_app_groups (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    team_ref        uuid REFERENCES apple_teams (id) ON DELETE SET NULL,
    primary_app_id  text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, primary_app_id)
);
-- Server-to-server notifications carry the primary App ID as aud: route by it.
CREATE INDEX apple_app_groups_primary_idx ON apple_app_groups (primary_app_id);

CREATE TABLE apple_clients (
    id             uuid PRIMARY KEY,
    tenant_id      uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    group_id       uuid NOT NULL REFERENCES apple_app_groups (id) ON DELETE CASCADE,
    client_id      text NOT NULL,
    kind           text NOT NULL CHECK (kind IN ('app', 'service')),
    nonce_mode     text NOT NULL DEFAULT 'sha256' CHECK (nonce_mode IN ('sha256', 'raw')),
    redirect_uris  text[] NOT NULL DEFAULT '{}',
    return_urls    text[] NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, client_id)
);
CREATE INDEX apple_clients_group_idx ON apple_clients (tenant_id, group_id);

CREATE TABLE provider_configs (
    id                 uuid PRIMARY KEY,
    tenant_id          uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    provider           text NOT NULL CHECK (provider IN ('google', 'facebook')),
    platform           text NOT NULL CHECK (platform IN ('ios', 'android', 'web')),
    enabled            boolean NOT NULL DEFAULT true,
    client_ids         text[] NOT NULL DEFAULT '{}',
    hosted_domain      text,
    app_id             text,
    app_secret_sealed  bytea,
    limited_login      boolean NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, provider, platform)
);

CREATE TABLE accounts (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    given_name      text,
    family_name     text,
    display_name    text,
    email           text,
    email_verified  boolean NOT NULL DEFAULT false,
    is_private_email boolean NOT NULL DEFAULT false,
    status          text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled', 'deleted')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz,
    deleted_at      timestamptz,
    UNIQUE (tenant_id, id)
);
CREATE INDEX accounts_email_idx ON accounts (tenant_id, lower(email)) WHERE email IS NOT NULL;

CREATE TABLE identities (
    id                       uuid PRIMARY KEY,
    tenant_id                uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    account_id               uuid NOT NULL,
    provider                 text NOT NULL CHECK (provider IN ('apple', 'google', 'facebook')),
    provider_scope           text NOT NULL,
    subject                  text NOT NULL,
    email                    text,
    email_verified           boolean NOT NULL DEFAULT false,
    is_private_email         boolean NOT NULL DEFAULT false,
    relay_email_deliverable  boolean NOT NULL DEFAULT true,
    given_name               text,
    family_name              text,
    real_user_status         smallint,
    apple_refresh_token_sealed bytea,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now(),
    last_sign_in_at          timestamptz,
    UNIQUE (tenant_id, provider, provider_scope, subject),
    FOREIGN KEY (tenant_id, account_id) REFERENCES accounts (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX identities_account_idx ON identities (tenant_id, account_id);

CREATE TABLE sessions (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    account_id      uuid NOT NULL,
    identity_id     uuid REFERENCES identities (id) ON DELETE SET NULL,
    client_id       text,
    platform        text,
    idp             text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    last_refreshed_at timestamptz,
    revoked_at      timestamptz,
    revoke_reason   text,
    FOREIGN KEY (tenant_id, account_id) REFERENCES accounts (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX sessions_account_idx ON sessions (tenant_id, account_id) WHERE revoked_at IS NULL;
CREATE INDEX sessions_identity_idx ON sessions (identity_id) WHERE revoked_at IS NULL;

CREATE TABLE refresh_tokens (
    id           uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    session_id   uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    parent_id    uuid REFERENCES refresh_tokens (id) ON DELETE SET NULL,
    token_hash   bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    used_at      timestamptz
);
CREATE INDEX refresh_tokens_session_idx ON refresh_tokens (session_id);

CREATE TABLE web_auth_requests (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    state_hash  bytea NOT NULL UNIQUE,
    nonce       text NOT NULL,
    client_id   text NOT NULL,
    return_url  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    consumed_at timestamptz
);
CREATE INDEX web_auth_requests_expiry_idx ON web_auth_requests (expires_at);

CREATE TABLE notification_receipts (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    jti          text NOT NULL,
    event_type   text NOT NULL,
    subject      text,
    event_time   timestamptz,
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, jti)
);

CREATE TABLE audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   uuid REFERENCES tenants (id) ON DELETE SET NULL,
    actor       text NOT NULL,
    action      text NOT NULL,
    target      text,
    details     jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_tenant_idx ON audit_log (tenant_id, created_at);

CREATE TABLE events_outbox (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    event_type    text NOT NULL,
    payload       jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    delivered_at  timestamptz
);
CREATE INDEX events_outbox_pending_idx ON events_outbox (created_at) WHERE delivered_at IS NULL;

CREATE TABLE import_jobs (
    id            uuid PRIMARY KEY,
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind          text NOT NULL,
    file_digest   text NOT NULL,
    dry_run       boolean NOT NULL DEFAULT false,
    status        text NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'running', 'completed', 'failed')),
    cursor        bigint NOT NULL DEFAULT 0,
    total_count   bigint NOT NULL DEFAULT 0,
    imported_count bigint NOT NULL DEFAULT 0,
    skipped_count bigint NOT NULL DEFAULT 0,
    failed_count  bigint NOT NULL DEFAULT 0,
    errors        jsonb NOT NULL DEFAULT '[]',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, kind, file_digest, dry_run)
);
