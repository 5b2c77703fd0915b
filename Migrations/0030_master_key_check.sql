-- A value sealed with the master key (issue 39 B8). A broker started with another key than the
-- one its secrets were sealed with started, answered /readyz 200, and failed each sign-in with
-- 500 secret_unreadable after committing it; `broker keys rotate` sealed new signing keys with
-- the wrong key. `serve` and every command that seals or opens a secret now open this value
-- first and refuse a key that does not open it. One row; written by the first process that
-- finds none (after checking the key against a sealed signing key, if the database has one).
-- Not a tenant's row: no tenant wall.
CREATE TABLE master_key_check (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    sealed     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
