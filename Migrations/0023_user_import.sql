-- Migrating existing social-login users (issue 24; decision 0047).
--
-- An account may carry the id the source system gave the person (Firebase `localId`, Auth0
-- `user_id`, Supabase `id`, or the product's own), unique per tenant. Accounts and identities an
-- import job created name it, so that `broker import rollback` removes exactly those.
ALTER TABLE accounts ADD COLUMN external_id text, ADD COLUMN import_job_id uuid;
CREATE UNIQUE INDEX accounts_external_id_idx ON accounts (tenant_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX accounts_import_job_idx ON accounts (tenant_id, import_job_id) WHERE import_job_id IS NOT NULL;
ALTER TABLE identities ADD COLUMN import_job_id uuid;
CREATE INDEX identities_import_job_idx ON identities (tenant_id, import_job_id) WHERE import_job_id IS NOT NULL;

-- The placeholder of migration 0001 was never used: a job is one import of one file, resumable
-- from `cursor_offset` (the byte after the last record of the last committed batch).
DROP TABLE import_jobs;
CREATE TABLE import_jobs (
    id               uuid PRIMARY KEY,
    tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    source           text NOT NULL CHECK (source IN ('firebase', 'auth0', 'supabase', 'jsonl', 'api')),
    file_name        text,
    file_digest      text,
    file_bytes       bigint,
    dry_run          boolean NOT NULL DEFAULT false,
    settings         jsonb NOT NULL DEFAULT '{}',
    status           text NOT NULL DEFAULT 'running'
                     CHECK (status IN ('running', 'stopped', 'completed', 'rolled_back')),
    stop_reason      text,
    cursor_offset    bigint NOT NULL DEFAULT 0,
    cursor_line      bigint NOT NULL DEFAULT 0,
    error_file_bytes bigint NOT NULL DEFAULT 0,
    records          bigint NOT NULL DEFAULT 0,
    created          bigint NOT NULL DEFAULT 0,
    updated          bigint NOT NULL DEFAULT 0,
    unchanged        bigint NOT NULL DEFAULT 0,
    conflicts        bigint NOT NULL DEFAULT 0,
    skipped          bigint NOT NULL DEFAULT 0,
    errors           bigint NOT NULL DEFAULT 0,
    identities       bigint NOT NULL DEFAULT 0,
    started_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    UNIQUE (tenant_id, id)
);
CREATE INDEX import_jobs_unfinished_idx ON import_jobs (tenant_id, file_digest) WHERE status IN ('running', 'stopped');
