-- Apple credential-state checks (issue 23 §3; decision 0043).
--
-- Each Apple identity holding Apple's refresh token is checked through the refresh grant at
-- most once per BROKER_APPLE_CREDENTIAL_CHECK_INTERVAL. When it is next due: NULL until the
-- worker first schedules it at a random point within one interval, so checks spread over the
-- interval instead of all falling due together.
ALTER TABLE identities ADD COLUMN credential_check_due_at timestamptz;
CREATE INDEX identities_credential_check_idx ON identities (credential_check_due_at)
    WHERE provider = 'apple' AND provider_refresh_token_sealed IS NOT NULL;

-- Pacing shared by every instance: a worker takes the next free slot (`next_at` moves on by
-- 1/rate per call), so all instances together make at most `rate` calls a second.
CREATE TABLE worker_pacing (
    name     text PRIMARY KEY,
    next_at  timestamptz NOT NULL DEFAULT now()
);
