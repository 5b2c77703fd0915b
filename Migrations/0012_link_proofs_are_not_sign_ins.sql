-- Identity tokens are spent once across sign-in and linking (issue 20 §3; decision 0031).
--
-- A link spends its proof by inserting the session a sign-in with that token would have
-- opened, revoked at once with `revoke_reason = 'link_proof'`: the sessions' primary key then
-- refuses the token at sign-in and at a second link, at no cost to sign-in. Such a row records
-- no sign-in and no revocation (the link has its own `identity.linked` audit row), so the
-- security events leave it out.
CREATE OR REPLACE VIEW security_events AS
SELECT s.tenant_id, s.created_at AS occurred_at, 'session.signed_in'::text AS action, s.account_id, s.id AS session_id,
       'user'::text AS actor, s.client_id AS target,
       jsonb_strip_nulls(jsonb_build_object('idp', s.idp, 'platform', s.platform, 'identity_id', s.identity_id)) AS details
FROM sessions s
WHERE s.revoke_reason IS DISTINCT FROM 'link_proof'
UNION ALL
SELECT s.tenant_id, s.revoked_at,
       CASE s.revoke_reason
           WHEN 'refresh_token_reuse' THEN 'session.family_revoked'
           WHEN 'signed_out' THEN 'session.signed_out'
           ELSE 'session.revoked'
       END,
       s.account_id, s.id, 'broker'::text, s.client_id, jsonb_build_object('reason', s.revoke_reason)
FROM sessions s
WHERE s.revoked_at IS NOT NULL AND s.revoke_reason IS DISTINCT FROM 'link_proof'
UNION ALL
SELECT a.tenant_id, a.created_at, a.action, (a.details ->> 'account_id')::uuid, (a.details ->> 'session_id')::uuid,
       a.actor, a.target, a.details
FROM audit_log a;
