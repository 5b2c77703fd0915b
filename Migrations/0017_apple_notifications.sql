-- Apple's server-to-server notifications (issue 23 §1; decision 0041).
--
-- A person who stops using Sign in with Apple with the app (`consent-revoked`) is unlinked from
-- their account; an account left with no identity is disabled, and remembered here by the
-- identity's key, so that a later Sign in with Apple (a new consent) links the identity to the
-- same account again and enables it. The row goes when the account is deleted.
CREATE TABLE consent_revocations (
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    provider        text NOT NULL,
    provider_scope  text NOT NULL,
    subject         text NOT NULL,
    account_id      uuid NOT NULL,
    revoked_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, provider, provider_scope, subject),
    FOREIGN KEY (tenant_id, account_id) REFERENCES accounts (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX consent_revocations_account_idx ON consent_revocations (tenant_id, account_id);

-- Why a disabled account is disabled: NULL (an operator or the API), or `consent_revoked`
-- (Apple's notification; the next Sign in with Apple of that identity enables it again).
ALTER TABLE accounts ADD COLUMN disabled_reason text;

-- A receipt per notification (`jti`) and routed tenant; no subject is kept.
ALTER TABLE notification_receipts ADD COLUMN outcome text;
