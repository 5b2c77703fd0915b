-- Account linking and the guideline 4.8 login policy (issue 11; decisions 0025 and 0026).
--
-- Policy: the tenant's mode already has its column; an exemption is a reason from the
-- guideline's five with the operator's note. Attestations record that a provider, as the
-- tenant configured it, meets the three criteria of the current text (Apple needs none).
ALTER TABLE tenants
    ADD COLUMN policy_exemption_reason text CHECK (policy_exemption_reason IN (
        'own-accounts-only', 'alternative-marketplace', 'education-enterprise', 'government-id', 'third-party-client')),
    ADD COLUMN policy_exemption_note text CHECK (length(policy_exemption_note) <= 1000),
    ADD COLUMN policy_exempted_at timestamptz,
    ADD CONSTRAINT tenants_policy_exemption_whole CHECK (
        (policy_exemption_reason IS NULL) = (policy_exempted_at IS NULL)
        AND (policy_exemption_reason IS NOT NULL OR policy_exemption_note IS NULL));

CREATE TABLE provider_attestations (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    provider     text NOT NULL CHECK (provider IN ('google', 'facebook')),
    attested_at  timestamptz NOT NULL DEFAULT now(),
    attested_by  text NOT NULL,
    PRIMARY KEY (tenant_id, provider)
);

-- Where each Apple client is offered: an App ID on ios (or macos when told), a Services ID on
-- the web and Android.
ALTER TABLE apple_clients ADD COLUMN platforms text[];
UPDATE apple_clients SET platforms = CASE kind WHEN 'app' THEN ARRAY['ios'] ELSE ARRAY['web', 'android'] END;
ALTER TABLE apple_clients
    ALTER COLUMN platforms SET NOT NULL,
    ADD CONSTRAINT apple_clients_platforms_known CHECK (
        cardinality(platforms) > 0
        AND CASE kind WHEN 'app' THEN platforms <@ ARRAY['ios', 'macos']::text[]
                      ELSE platforms <@ ARRAY['web', 'android']::text[] END);

-- Google and Facebook may be offered in macOS apps too.
ALTER TABLE provider_configs DROP CONSTRAINT provider_configs_platforms_check;
ALTER TABLE provider_configs ADD CONSTRAINT provider_configs_platforms_check
    CHECK (platforms <@ ARRAY['ios', 'android', 'web', 'macos']::text[]);
