import Foundation
import Logging

/// Who asks and from where, passed explicitly to every service call: the HTTP routes build it
/// from the request they hold, the CLI from its invocation, workers from their job. The services
/// never read it from a task-local, so the same call behaves the same from every edge.
package struct OperationContext: Sendable {
    /// The request's id (`X-Request-Id`), or the CLI invocation's; it goes into logs.
    package var requestID: String
    /// The caller's address, for security events; nil for the CLI and workers.
    package var remoteAddress: String?
    /// The logger of this operation, carrying its request id.
    package var logger: Logger

    package init(requestID: String, remoteAddress: String? = nil, logger: Logger) {
        self.requestID = requestID
        self.remoteAddress = remoteAddress
        self.logger = logger
    }

    /// A context for work no request started (the CLI, background work, tests): a fresh id.
    package static func detached(_ logger: Logger, remoteAddress: String? = nil) -> OperationContext {
        var logger = logger
        let id = UUID().uuidString.lowercased()
        logger[metadataKey: "request_id"] = "\(id)"
        return OperationContext(requestID: id, remoteAddress: remoteAddress, logger: logger)
    }
}
