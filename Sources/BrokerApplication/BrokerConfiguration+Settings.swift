import BrokerCore
import Providers

extension BrokerConfiguration {
    /// Every environment variable the broker reads, in the order of docs/configuration.md, whose
    /// tables are generated from this list (`ConfigurationDocsTests` fails when they differ and
    /// rewrites them with `BROKER_UPDATE_DOCS=1`); `broker serve --help` prints it too. A
    /// default that comes from a constant of the code is interpolated from it. The names are a
    /// contract with every deployment: never rename one.
    public static let settings: [Setting] = [
        Setting(
            "DATABASE_URL", .database, default: "unset: the embedded default",
            """
            An existing PostgreSQL: \
            `postgres://user:pass@host:5432/db?sslmode=disable|prefer|require|verify-full`, or \
            `postgres:///db?host=/socket/dir&user=name` for a unix socket. Unset, every command uses the \
            embedded default (next section). The operator guide's [An existing \
            PostgreSQL](operator-guide.md#an-existing-postgresql-database_url) says what the database and its \
            user need.
            """),
        Setting(
            "BROKER_MASTER_KEY", .database,
            default: "generated into `BROKER_DATA_DIR/master.key` (embedded default only)",
            """
            Base64 of 32 random bytes (`openssl rand -base64 32`). Encrypts signing keys and the other secrets \
            stored in the database with AES-256-GCM. **Required with `DATABASE_URL`.** When set, it takes \
            precedence over the generated file. Losing it loses the secrets. The database keeps a value sealed \
            with it (migration 0030): `serve`, `demo` and every command that seals or opens a secret refuse a \
            key that does not open it (`master_key_mismatch`, naming this variable) before serving or writing \
            anything. See the operator guide's [The master key](operator-guide.md#the-master-key).
            """),
        Setting(
            "BROKER_DB_POOL_SIZE", .database, default: "three times the CPU cores, at least 4",
            """
            Maximum PostgreSQL connections per process (1–500). Far more connections than PostgreSQL has cores \
            add latency, not throughput. Size PostgreSQL's `max_connections` for instances × this, plus admin \
            commands.
            """),
        Setting(
            "BROKER_DB_STATEMENT_TIMEOUT", .database, default: "`5`",
            """
            Seconds a database statement may run (1–600); one that runs out answers 503 \
            `database_unavailable`. Migrations and the `ANALYZE` after them run without it.
            """),
        Setting(
            "BROKER_DB_CONNECT_TIMEOUT", .database, default: "`10`",
            """
            Seconds to open a connection to PostgreSQL (1–600). `broker serve` and every admin command that \
            cannot connect fail within it and name the cause (connection refused at host:port, no such \
            database, authentication failed, TLS required, no answer) with a hint; the operator guide's \
            [Health, readiness, metrics](operator-guide.md#health-readiness-metrics) lists the codes.
            """),
        Setting(
            "BROKER_DB_TENANT_SCOPE", .database, default: "`connection`",
            """
            Where each statement's tenant scope is set (the tenant wall, decision 0055). `connection`: on the \
            connection, when it serves another tenant than before (free while it serves one). `transaction`: \
            in a transaction around every statement, for a pooler in transaction mode such as PgBouncer's \
            `pool_mode = transaction` (three more round trips for a statement on its own; the statement \
            timeout, `jit` and `plan_cache_mode` are then set in that transaction too, and no connection sends \
            them at start). `broker serve` refuses `connection` behind a pooler in transaction mode (decision \
            0086). Any other value is refused. See the operator guide's [The tenant \
            wall](operator-guide.md#the-tenant-wall-row-level-security).
            """),
        Setting(
            "BROKER_DB_PREPARED_STATEMENTS", .database, default: "`named`",
            """
            How the broker's most frequent statements are sent (decision 0086). `named`: prepared once per \
            connection and then only bound and run. `unnamed`: sent whole and parsed with every execution, \
            for a pooler in transaction mode that cannot carry named prepared statements (PgBouncer before \
            1.21, or `max_prepared_statements = 0`). `broker serve` refuses to start with `named` behind a \
            pooler it finds cannot carry them. Any other value is refused.
            """),
        Setting(
            "BROKER_DB_SESSION_URL", .database, default: "as `DATABASE_URL`",
            """
            Where the work that holds a session connects: the cache invalidations' `LISTEN`, the migration \
            lock, an import job's lock (decision 0086). Behind a pooler in transaction mode, PostgreSQL \
            directly or a pool in session mode; `broker serve` refuses to start without it there, or with one \
            that is itself in transaction mode. Needs `DATABASE_URL`.
            """),
        Setting(
            "BROKER_DB_SIGN_IN_BATCHES", .database, default: "`2`",
            """
            Returning sign-ins that arrive together are written in one statement and one commit; so are first \
            sign-ins (new people, and people this process has not signed in yet; decision 0059), refresh-token \
            rotations (decision 0074), web callbacks' claims of their states (decision 0102) and Apple's \
            `email-disabled`, `email-enabled`, `consent-revoked` and \
            `account-delete` notifications (decisions 0046, 0058). At most this many such statements of each \
            kind run at once (0–64); what arrives while they run waits and goes together as the next one. A \
            lone sign-in never waits. `0` writes each in a statement of its own. Decision 0030.
            """),
        Setting(
            "BROKER_DATA_DIR", .embeddedDefault, default: "`./.broker`",
            """
            Folder of the embedded cluster (`postgres/`), its socket (`run/`) and its generated `master.key`. \
            PostgreSQL's own variables in the caller's environment (`PGPORT`, `PGHOST`, …) do not reach the \
            embedded cluster. See the operator guide's [Embedded \
            default](operator-guide.md#embedded-default-no-database_url).
            """),
        Setting(
            "BROKER_DEMO_DATA_DIR", .embeddedDefault, default: "`./.broker-demo`",
            """
            The embedded cluster of `broker demo`, which runs only there: never on `DATABASE_URL` (refused, \
            since the demo's MockIdP would sign people in to every tenant) nor on the embedded default of \
            `serve`.
            """),
        Setting(
            "BROKER_POSTGRES_BIN", .embeddedDefault, default: "newest `/usr/lib/postgresql/N/bin`",
            """
            Folder holding `initdb` and `pg_ctl` for the embedded default. A cluster starts only with the \
            major version that created it: pin this to the cluster's version (for example \
            `/usr/lib/postgresql/15/bin`) before installing a newer PostgreSQL beside it.
            """),
        Setting(
            "BROKER_POSTGRES_USER", .embeddedDefault, default: "`postgres`",
            """
            OS user that runs the embedded PostgreSQL when the broker runs as root (PostgreSQL refuses root).
            """),
        Setting(
            "BROKER_HOST", .listening, default: "`127.0.0.1`",
            """
            Address to listen on. The container image (`deploy/Dockerfile`) sets `0.0.0.0`.
            """),
        Setting(
            "BROKER_PORT", .listening, default: "`8080`",
            """
            Port to listen on (0–65535). A port that is taken is an error naming the address and the setting \
            that moves it (`BROKER_PORT`/`BROKER_HOST` for the broker, `--idp-port` for the demo's MockIdP).
            """),
        Setting(
            "BROKER_PUBLIC_URL", .listening, default: "`http://HOST:PORT`",
            """
            The external base URL, `http` or `https` with a host (a trailing `/` is dropped). Tenant issuers \
            are `{BROKER_PUBLIC_URL}/t/{tenant}`; the web flow's default redirect URIs are \
            `{BROKER_PUBLIC_URL}/apple/callback` and `{BROKER_PUBLIC_URL}/oidc/callback`; with `https`, every \
            response carries `Strict-Transport-Security`. Set it in every deployment (see \
            [below](#what-every-deployment-sets)).
            """),
        Setting(
            "BROKER_MAX_BODY_BYTES", .listening, default: "`65536`",
            """
            Largest request body accepted (1024–10485760); larger requests get 413 `payload_too_large`. `POST \
            /v1/accounts/import` takes up to 4 MiB (or this, if larger): 1,000 records.
            """),
        Setting(
            "BROKER_REQUEST_TIMEOUT", .listening, default: "`10`",
            """
            Seconds within which every request is answered (1–600). Past it: 503 `database_unavailable` (the \
            database was unreachable while the request waited) or `request_timeout`, with `Retry-After`. A \
            request whose client sent part of its body and stopped gets 408 `request_body_timeout` and its \
            connection is closed, logged at debug and counted once a minute at notice (`clients did not send \
            the whole request body ...`), like dropped connections.
            """),
        Setting(
            "BROKER_DRAIN_SECONDS", .listening, default: "`0`",
            """
            Seconds `broker serve` keeps serving after SIGTERM or SIGINT before it stops accepting (0–60): \
            meanwhile `/readyz` answers 503 `shutting_down`, so a load balancer takes the instance out, and \
            every answer carries `Connection: close`, so a client's next request goes to another instance. \
            Then it stops accepting and finishes what is in flight, as with `0`. Set it above the load \
            balancer's time to notice (HAProxy: `inter` × `fall`); under Kubernetes, a `preStop` sleep does \
            the same (`deploy/kubernetes`).
            """),
        Setting(
            "BROKER_HTTP_IDLE_TIMEOUT", .listening, default: "`60`",
            """
            Seconds after which an idle connection, or one with a request only partly sent, is closed \
            (1–3600).
            """),
        Setting(
            "BROKER_HTTP_HEADER_TIMEOUT", .listening, default: "`10`",
            """
            Seconds within which a new connection must send a whole request head, and any later request its \
            whole head once its first byte arrived (1–600); else the connection is closed.
            """),
        Setting(
            "BROKER_HTTP_MAX_CONNECTIONS", .listening, default: "`1024`",
            """
            Connections served at once (1–100000); more wait in the listen backlog.
            """),
        Setting(
            "BROKER_HTTP_MAX_CONNECTIONS_PER_IP", .listening, default: "`512`",
            """
            Connections one client peer address may hold open (1–100000), above a busy backend's connection \
            pool. A request on one more connection is answered 503 `connection_limit` with `Retry-After: 1` \
            and `Connection: close`. Peers inside `BROKER_TRUSTED_PROXIES` are not capped. Raise it for a load \
            test from one address, or list the load balancer in `BROKER_TRUSTED_PROXIES`.
            """),
        Setting(
            "BROKER_API_KEY_RATE_LIMIT", .abuseLimits, default: "`\(AbuseLimits.defaultAPIKey.perSecond)`",
            """
            Requests a second per API key and per instance (1–1000000), unless its tenant sets its own \
            (`broker tenant set --rate-limit`). Over it: 429 `rate_limited` with `Retry-After`.
            """),
        Setting(
            "BROKER_API_KEY_RATE_BURST", .abuseLimits,
            default: "`\(AbuseLimits.defaultAPIKey.burst)`, or twice `BROKER_API_KEY_RATE_LIMIT` when only that is set",
            """
            Requests at once per API key and per instance (1–2000000, at least the rate).
            """),
        Setting(
            "BROKER_PUBLIC_RATE_LIMIT", .abuseLimits, default: "`\(AbuseLimits.defaultPublicRoutes.perSecond)`",
            """
            Requests a second per client address and per instance on the public routes: `/apple/callback`, \
            `/apple/notifications`, `/oidc/callback`, and each tenant's JWKS and discovery document \
            (1–1000000).
            """),
        Setting(
            "BROKER_PUBLIC_RATE_BURST", .abuseLimits,
            default: "`\(AbuseLimits.defaultPublicRoutes.burst)`, or twice `BROKER_PUBLIC_RATE_LIMIT` when only that is set",
            """
            Requests at once per client address and per instance on the public routes (1–2000000, at least the \
            rate).
            """),
        Setting(
            "BROKER_FAILED_AUTH_RATE_LIMIT", .abuseLimits, default: "`\(AbuseLimits.defaultFailedAuthentication.perSecond)`",
            """
            Refused API-key authentications (missing, malformed, unknown or revoked key) a second per client \
            address and per instance (1–1000000). Past them, that address's requests with a key this instance \
            does not know answer 429 `rate_limited` without a lookup.
            """),
        Setting(
            "BROKER_FAILED_AUTH_RATE_BURST", .abuseLimits,
            default: "`\(AbuseLimits.defaultFailedAuthentication.burst)`, or twice `BROKER_FAILED_AUTH_RATE_LIMIT` when only that is set",
            """
            Refused API-key authentications at once per client address and per instance (1–2000000, at least \
            the rate).
            """),
        Setting(
            "BROKER_TRUSTED_PROXIES", .abuseLimits, default: "none",
            """
            Comma-separated CIDR blocks or addresses, IPv4 or IPv6 (`10.0.0.0/8,fd00::/8`), of your proxies. \
            `X-Forwarded-For` is read only from peers inside them; otherwise the peer's address is the \
            client's. An entry the broker cannot read stops it at start, naming the entry.
            """),
        Setting(
            "BROKER_REFRESH_REUSE_INTERVAL", .sessions, default: "`\(Int(BrokerConfiguration.defaultRefreshReuseInterval))`",
            """
            Seconds during which a just-rotated refresh token still returns its successor (client retries, \
            concurrent refreshes) instead of revoking its family (0–300); after it, reuse revokes the \
            session's family. `0` turns the grace off. Decision 0017; the API guide's [Broker \
            sessions](api-guide.md#broker-sessions).
            """),
        Setting(
            "BROKER_APPLE_BASE_URL", .providers, default: "`\(Apple.defaultBaseURL)`",
            """
            Apple's keys (`/auth/keys`), token and revoke endpoints (`/auth/token`, `/auth/revoke`), the web \
            flow's authorize page (`/auth/authorize`) and the user migration of team transfers \
            (`/auth/usermigrationinfo`). The issuer checked in Apple's tokens stays \
            `https://appleid.apple.com`.
            """),
        Setting(
            "BROKER_GOOGLE_JWKS_URL", .providers, default: "`\(Google.defaultKeysURL)`",
            """
            Google's signing keys.
            """),
        Setting(
            "BROKER_GOOGLE_DISCOVERY_URL", .providers, default: "`\(Google.defaultDiscoveryURL)`",
            """
            Google's discovery document, read by `broker provider enable google ... --client-secret-file` for \
            the web flow's authorize and token endpoints.
            """),
        Setting(
            "BROKER_FACEBOOK_GRAPH_URL", .providers, default: "`\(Facebook.defaultGraphURL)`",
            """
            Graph API base URL with its version, for `debug_token` and `/me`. v24.0 (October 2025) is \
            supported by Meta into late 2027; move to a newer version before Meta retires it.
            """),
        Setting(
            "BROKER_FACEBOOK_JWKS_URL", .providers, default: "`\(Facebook.defaultKeysURL)`",
            """
            Limited Login's signing keys.
            """),
        Setting(
            "BROKER_PROVIDER_TIMEOUT", .providers, default: "`10`",
            """
            Seconds any outbound call to a provider may take (1–120): key set fetches, Apple's token and \
            revoke endpoints, Graph, OpenID Connect discovery. It bounds the whole answer: connecting, headers \
            and body; longer is 503 `provider_unavailable` (`apple_unavailable` at Apple's token endpoint). A \
            call a request waits on is also cut to what the request has left of `BROKER_REQUEST_TIMEOUT`, less \
            0.75 s, so that a provider's outage is always answered as one, never as `request_timeout` \
            (decision 0065); workers (revocations, credential checks) get the whole timeout. After 5 failures \
            in a row an endpoint's calls fail at once: the operator guide's [When a provider is \
            down](operator-guide.md#when-a-provider-is-down-circuit-breakers).
            """),
        Setting(
            "BROKER_APPLE_RELAY_DOMAINS", .providers, default: "none",
            """
            Comma-separated email domains Apple announces for private-relay addresses, added to the built-in \
            `privaterelay.appleid.com` and `private.icloud.com`. An address on any of them is private wherever \
            it comes from (any provider's sign-in, the web flow, imports) and never joins accounts by email. \
            Migration 0029 marked stored `private.icloud.com` addresses; identities stored before a domain of \
            this list was added are marked on their next sign-in. Each entry must be a domain name.
            """),
        Setting(
            "BROKER_APPLE_CREDENTIAL_CHECK_INTERVAL", .appleLifecycle, default: "`86400`",
            """
            Seconds between two checks of one stored Apple refresh token through Apple's refresh grant \
            (0–31536000). `0` turns the checks of `broker serve` off. See the operator guide's [Apple \
            credential checks](operator-guide.md#apple-credential-checks).
            """),
        Setting(
            "BROKER_APPLE_MAX_CALLS_PER_SECOND", .appleLifecycle, default: "`10`",
            """
            Calls a second to Apple for credential checks, all instances together (1–1000); give every \
            instance the same value. Also the default rate of `broker apple transfer export|import \
            --max-calls-per-second`, paced within that command.
            """),
        Setting(
            "BROKER_WEBHOOK_ALLOW_INSECURE", .appleLifecycle, default: "`0`",
            """
            `1`: webhooks may be `http://` and point at loopback or private addresses, for tests and demos \
            only. `0` or unset keeps the rule (`https://` to public addresses). Any other value is a \
            configuration error. The CLI reads it when it sets a URL and `broker serve` at every delivery: \
            give both the same value. See the operator guide's [Webhooks](operator-guide.md#webhooks).
            """),
        Setting(
            "BROKER_LOG_LEVEL", .observability, default: "`info` for `serve`, `warning` for admin commands",
            """
            `trace`, `debug`, `info`, `notice`, `warning`, `error`, `critical`. See the operator guide's \
            [Logs](operator-guide.md#logs).
            """),
        Setting(
            "BROKER_LOG_FORMAT", .observability, default: "`json`",
            """
            `json` (one object per line on stderr) or `text`.
            """),
        Setting(
            "BROKER_METRICS_PORT", .observability, default: "unset: `/metrics` on `BROKER_PORT`",
            """
            Serve `/metrics` on this port of `BROKER_HOST` only, on a listener of its own (1–65535, not \
            `BROKER_PORT`, or `serve` stops at start). The API's port then answers `/metrics` with 404 \
            `not_found`. Keep the port off the public network. See the operator guide's [Health, readiness, \
            metrics](operator-guide.md#health-readiness-metrics).
            """),
        Setting(
            "OTEL_EXPORTER_OTLP_ENDPOINT", .observability, default: "unset: no traces",
            """
            An OpenTelemetry collector's OTLP/HTTP address (e.g. `http://127.0.0.1:4318`): `serve` sends spans \
            of every request, database statement and outbound call to its `/v1/traces`. \
            `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` does the same for traces alone. Unset, no span work is done \
            (decision 0053).
            """),
        Setting(
            "OTEL_EXPORTER_OTLP_PROTOCOL", .observability, default: "`http/protobuf`",
            """
            `http/json` for JSON (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` for traces alone). gRPC is not built \
            in: `grpc` stops `serve` at start, naming what to set instead.
            """),
        Setting(
            "OTEL_*", .observability, default: "the OpenTelemetry specification's",
            """
            `OTEL_SERVICE_NAME` (default `identity-broker`), `OTEL_TRACES_SAMPLER` and \
            `OTEL_TRACES_SAMPLER_ARG`, `OTEL_BSP_*`, `OTEL_EXPORTER_OTLP_HEADERS`, \
            `OTEL_EXPORTER_OTLP_TIMEOUT`. See the operator guide's [Traces](operator-guide.md#traces).
            """),
        Setting(
            "NOTIFY_SOCKET", .observability, default: "unset: nothing sent",
            """
            Set by systemd for a `Type=notify` unit: `serve` sends one datagram, `READY=1` with a `STATUS=` \
            line, to this unix socket path once its port is open and it has asked the database whether it \
            answers (`STATUS` says when it did not; `/readyz` tells when it does). Abstract sockets (`@name`) \
            are not supported. `serve` takes the variable out of its environment (decision 0057).
            """),
    ]
}
