-- A prototype of the tenant wall (issue 25): row-level security, forced, on every table that
-- holds a tenant_id (and on tenants), with one policy from the setting broker.tenant_id (a
-- tenant's id, or * for work across tenants; unset: no rows), and the non-superuser role
-- broker_serve. Benchmarks/e2e/lib.sh applies it with WALL_PROTOTYPE=1 (TARGET=tcp) to measure
-- what the policies cost the hot statements before the broker sets the scope itself.
-- The scope, read once per statement: a policy's (SELECT f()) is an InitPlan, evaluated once,
-- where a bare f() would be called for every row the statement reads.
CREATE FUNCTION broker_scope_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT nullif(nullif(current_setting('broker.tenant_id', true), ''), '*')::uuid
$$;
CREATE FUNCTION broker_scope_all() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(current_setting('broker.tenant_id', true) = '*', false)
$$;
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id'
             WHERE c.relkind IN ('r', 'p') AND c.relnamespace = 'public'::regnamespace
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_wall ON %I USING ((SELECT broker_scope_all()) OR tenant_id = (SELECT broker_scope_tenant()))', t);
    END LOOP;
END $$;
ALTER TABLE tenants ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON tenants USING ((SELECT broker_scope_all()) OR id = (SELECT broker_scope_tenant()));
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'broker_serve') THEN CREATE ROLE broker_serve LOGIN; END IF;
END $$;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO broker_serve;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO broker_serve;
