-- Security events in one place (issue 9 §6; decision 0020).
--
-- Every sign-in opens a session and every sign-out, revocation and reuse-triggered family
-- revocation stamps one, in the same statement that does it: the session row is already the
-- durable, transactional record of those events (decision 0013), with the tenant, account,
-- session, identity, client and platform. Copying each into audit_log would double the rows a
-- sign-in writes. This view reads them as events, beside audit_log's rows (operator actions,
-- replayed identity tokens, sampled API-key failures), in one shape:
-- (tenant_id, occurred_at, action, account_id, session_id, actor, target, details).
CREATE VIEW security_events AS
SELECT s.tenant_id, s.created_at AS occurred_at, 'session.signed_in'::text AS action, s.account_id, s.id AS session_id,
       'user'::text AS actor, s.client_id AS target,
       jsonb_strip_nulls(jsonb_build_object('idp', s.idp, 'platform', s.platform, 'identity_id', s.identity_id)) AS details
FROM sessions s
UNION ALL
SELECT s.tenant_id, s.revoked_at,
       CASE s.revoke_reason
           WHEN 'refresh_token_reuse' THEN 'session.family_revoked'
           WHEN 'signed_out' THEN 'session.signed_out'
           ELSE 'session.revoked'
       END,
       s.account_id, s.id, 'broker'::text, s.client_id, jsonb_build_object('reason', s.revoke_reason)
FROM sessions s
WHERE s.revoked_at IS NOT NULL
UNION ALL
SELECT a.tenant_id, a.created_at, a.action, (a.details ->> 'account_id')::uuid, (a.details ->> 'session_id')::uuid,
       a.actor, a.target, a.details
FROM audit_log a;
