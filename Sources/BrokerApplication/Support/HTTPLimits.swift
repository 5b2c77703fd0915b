/// Bounds on what one client can hold of the server (decision 0015).
public struct HTTPLimits: Sendable {
    /// The longest a request may take, whatever it waits for (`BROKER_REQUEST_TIMEOUT`).
    public var requestTimeout: Duration
    /// A connection with nothing going on, or with a request head or body only partly sent,
    /// is closed after this long (`BROKER_HTTP_IDLE_TIMEOUT`).
    public var idleTimeout: Duration
    /// Connections served at once; more wait in the kernel's backlog (`BROKER_HTTP_MAX_CONNECTIONS`).
    public var maxConnections: Int
    /// Connections one client address may hold open; more are closed as they are accepted
    /// (`BROKER_HTTP_MAX_CONNECTIONS_PER_IP`). Trusted proxies are not capped (decision 0048).
    public var maxConnectionsPerAddress: Int
    /// A new connection's first request head, and any head once its first byte arrived, must be
    /// complete within this (`BROKER_HTTP_HEADER_TIMEOUT`); else the connection is closed.
    public var headerTimeout: Duration

    public init(
        requestTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(60), maxConnections: Int = 1_024,
        maxConnectionsPerAddress: Int = 512, headerTimeout: Duration = .seconds(10)
    ) {
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
        self.maxConnections = maxConnections
        self.maxConnectionsPerAddress = maxConnectionsPerAddress
        self.headerTimeout = headerTimeout
    }
}
