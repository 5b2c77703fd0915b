-- The authorization code flow of each tenant's OpenID Provider (issue 42 §2, decision 0082).
--
-- A relying party's sign-in is a web sign-in (decision 0038) that was asked for by one of the
-- tenant's clients: its state carries the client (`oauth_client_id`) and what the client asked
-- (`oauth_request`: scope, nonce, PKCE challenge, as JSON), and the broker code its callback
-- keeps is the client's authorization code. A code is redeemed once at the token endpoint
-- (`redeemed_at`, the grant it kept emptied) and remembers the session it opened
-- (`session_id`), so that a second use ends that session (RFC 6749 §4.1.2): `reused_at` marks
-- a second use that came before the first had recorded its session, which the first then ends
-- itself. A redeemed code stays until the sweep, an hour after it expired.
ALTER TABLE web_sign_in_states
    ADD COLUMN oauth_client_id text,
    ADD COLUMN oauth_request text,
    ADD CONSTRAINT web_sign_in_states_oauth_request CHECK ((oauth_client_id IS NULL) = (oauth_request IS NULL));

ALTER TABLE web_sign_in_codes
    ADD COLUMN oauth_client_id text,
    ADD COLUMN redeemed_at timestamptz,
    ADD COLUMN session_id uuid,
    ADD COLUMN reused_at timestamptz;

-- The session a relying party's sign-in opened is that client's: only it refreshes the session
-- at the token endpoint, and the scope it was granted says what userinfo and the ID token show.
ALTER TABLE sessions
    ADD COLUMN oauth_client_id text,
    ADD COLUMN oauth_scope text,
    ADD CONSTRAINT sessions_oauth_scope CHECK ((oauth_client_id IS NULL) = (oauth_scope IS NULL));
