-- Revoking a compromised signing key (issue 25; `broker keys revoke --tenant T KID`).
--
-- A revoked key leaves the tenant's JWKS at once and stops verifying: access tokens it signed
-- introspect inactive, while sessions stay and get tokens from another key on refresh. Unlike a
-- retirement (published for a day more so tokens it signed keep verifying), a revocation is final.
ALTER TABLE signing_keys ADD COLUMN revoked_at timestamptz;
