-- The tenant wall (decision 0055): row-level security, forced, on every table that holds a
-- tenant's rows, so that a statement which forgot its tenant filter finds nothing of another
-- tenant. FORCE applies the policies to the tables' owner too; superusers and roles with
-- BYPASSRLS still see every row (broker serve runs as broker_serve, which has neither).
--
-- The policies read the setting broker.tenant_id, which the broker gives each connection
-- before a statement: a tenant's id (that tenant's rows), '*' (every tenant's: work that
-- crosses tenants by design), or nothing (no rows). Read through (SELECT f()), the setting is
-- an InitPlan evaluated once per statement, not once per row. Without a WITH CHECK clause the
-- USING expression also checks the rows an INSERT or UPDATE writes: a write into another
-- tenant's rows is refused. Every comparison the policies make (= on uuid) is leakproof, so
-- the statements' own conditions keep their indexes.
-- worker_pacing, the one table without a tenant_id, paces work across all tenants.
CREATE FUNCTION broker_scope_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT nullif(nullif(current_setting('broker.tenant_id', true), ''), '*')::uuid
$$;

CREATE FUNCTION broker_scope_all() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(current_setting('broker.tenant_id', true) = '*', false)
$$;

ALTER TABLE tenants ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON tenants
    USING ((SELECT broker_scope_all()) OR id = (SELECT broker_scope_tenant()));

ALTER TABLE accounts ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON accounts
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON api_keys
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE apple_app_groups ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON apple_app_groups
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE apple_clients ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON apple_clients
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE apple_revocations ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON apple_revocations
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE apple_teams ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON apple_teams
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE audit_log ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON audit_log
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE consent_revocations ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON consent_revocations
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE events_outbox ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON events_outbox
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE identities ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON identities
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE import_jobs ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON import_jobs
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE notification_receipts ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON notification_receipts
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE provider_attestations ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON provider_attestations
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE provider_configs ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON provider_configs
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE refresh_tokens ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON refresh_tokens
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE sessions ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON sessions
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE signing_keys ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON signing_keys
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE web_auth_requests ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON web_auth_requests
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE web_sign_in_codes ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON web_sign_in_codes
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE web_sign_in_states ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON web_sign_in_states
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE webhook_deliveries ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON webhook_deliveries
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));

ALTER TABLE webhooks ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON webhooks
    USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()));
