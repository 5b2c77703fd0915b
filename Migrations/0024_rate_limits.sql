-- Abuse limits (issue 25; decision 0048).
--
-- A tenant may give its API keys a rate of their own (`broker tenant set --rate-limit N
-- [--burst M]`); NULL keeps the instance's default (`BROKER_API_KEY_RATE_LIMIT`, 200/s, burst 400).
-- Both or neither: a rate without a burst gets twice the rate as burst when it is set.
ALTER TABLE tenants
    ADD COLUMN rate_limit integer CHECK (rate_limit BETWEEN 1 AND 1000000),
    ADD COLUMN rate_burst integer CHECK (rate_burst BETWEEN 1 AND 2000000),
    ADD CONSTRAINT tenants_rate_limit_pair CHECK ((rate_limit IS NULL) = (rate_burst IS NULL));
