-- Apple's second private-relay domain (issue 39 A3). Since 2026 Apple issues new Sign in with
-- Apple and Hide My Email addresses on private.icloud.com beside privaterelay.appleid.com. The
-- broker knew only the first: identities and accounts holding an address on the new domain
-- were stored as not private (an Apple token without is_private_email, an import, a Google
-- account made with such an address), so they could join accounts by email. They are marked
-- private here, as the broker now marks them when it writes them. Every tenant's rows: the
-- scope is opened for this transaction only.
SELECT set_config('broker.tenant_id', '*', true);

UPDATE identities SET is_private_email = true, updated_at = now()
WHERE NOT is_private_email AND lower(email) LIKE '%@private.icloud.com';

UPDATE accounts SET is_private_email = true, updated_at = now()
WHERE NOT is_private_email AND email_key LIKE '%@private.icloud.com';

SELECT set_config('broker.tenant_id', '', true);
