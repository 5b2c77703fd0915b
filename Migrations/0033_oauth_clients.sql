-- The relying parties of each tenant's OpenID Provider (issue 42 §1, decision 0081): the
-- product's own apps that sign people in through /t/{tenant}/authorize and /t/{tenant}/token.
-- A confidential client keeps only the SHA-256 of its secret (the secret is 256 random bits);
-- a public client has none (secret_hash NULL) and must use PKCE. Redirect URIs are compared
-- exactly, as registered; their rules are checked when they are registered (RedirectURI).
CREATE TABLE oauth_clients (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    client_id text NOT NULL CHECK (client_id ~ '^ibc_[A-Za-z0-9_-]{22}$'),
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    is_public boolean NOT NULL,
    secret_hash bytea CHECK (length(secret_hash) = 32),
    redirect_uris text[] NOT NULL CHECK (cardinality(redirect_uris) BETWEEN 1 AND 20),
    post_logout_redirect_uris text[] NOT NULL DEFAULT '{}' CHECK (cardinality(post_logout_redirect_uris) <= 20),
    allow_loopback boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    secret_rotated_at timestamptz,
    PRIMARY KEY (tenant_id, client_id),
    CONSTRAINT oauth_clients_secret_by_kind CHECK (is_public = (secret_hash IS NULL))
);

-- The tenant wall (decision 0055), as on every table that holds a tenant's rows.
ALTER TABLE oauth_clients ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON oauth_clients
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));
