-- Providers are data (issue 21; decision 0034).
--
-- A tenant's provider is an id (a slug; `apple`, `google` and `facebook` are reserved for their
-- own types), a type and the type's settings as a JSON object that the type's own code
-- validates. No constraint lists provider names or types any more: a provider an operator adds
-- (an OpenID Connect issuer such as LINE) needs no migration. Existing rows keep their id, take
-- the type of the same name, and carry Google's hosted domain and Facebook's Limited Login flag
-- in their settings. Identities, sessions and refresh tokens name providers by id, which does
-- not change, so every one keeps working.
ALTER TABLE identities DROP CONSTRAINT IF EXISTS identities_provider_check;
ALTER TABLE provider_attestations DROP CONSTRAINT IF EXISTS provider_attestations_provider_check;
ALTER TABLE provider_configs DROP CONSTRAINT IF EXISTS provider_configs_provider_check;
-- Apple's row (it says only whether Sign in with Apple is on) has no client ids of its own.
ALTER TABLE provider_configs DROP CONSTRAINT IF EXISTS provider_configs_client_ids_check;

ALTER TABLE provider_configs
    ADD COLUMN type text,
    ADD COLUMN enabled boolean NOT NULL DEFAULT true,
    ADD COLUMN settings jsonb NOT NULL DEFAULT '{}';
UPDATE provider_configs SET
    type = provider,
    settings = jsonb_strip_nulls(jsonb_build_object(
        'hosted_domain', hosted_domain,
        'limited_login', CASE WHEN limited_login THEN true END));
ALTER TABLE provider_configs
    ALTER COLUMN type SET NOT NULL,
    DROP COLUMN hosted_domain,
    DROP COLUMN limited_login,
    ADD CONSTRAINT provider_configs_id_is_slug CHECK (provider ~ '^[a-z][a-z0-9-]{1,31}$'),
    ADD CONSTRAINT provider_configs_type_is_slug CHECK (type ~ '^[a-z][a-z0-9-]{1,31}$'),
    ADD CONSTRAINT provider_configs_settings_object CHECK (jsonb_typeof(settings) = 'object');

-- Two providers of one tenant never share an issuer (an OpenID Connect identity is its issuer
-- and `sub`): the second would sign the first one's people in under another id.
CREATE UNIQUE INDEX provider_configs_issuer_idx ON provider_configs (tenant_id, (settings ->> 'issuer'))
    WHERE settings ? 'issuer';
