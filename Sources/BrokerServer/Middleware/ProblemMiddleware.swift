import BrokerApplication
import BrokerCore
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import OpenAPIRuntime
import Storage

/// Turns every error into an RFC 9457 problem with a stable `code`: domain errors keep their
/// code, requests that do not match the contract get `invalid_request`, unknown routes
/// `not_found`, and anything unexpected `internal_error` (logged, never shown). While the
/// database cannot be reached every failure is 503 `database_unavailable`, whatever error the
/// pool reported (decision 0032).
struct ProblemMiddleware: RouterMiddleware {
    typealias Context = BrokerRequestContext

    let database: Database

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch {
            if error.isCancellation || Task.isCancelled {
                // The request's deadline passed and its work was cancelled: the client has its
                // 503 from RequestDeadlineResponder already; this answer goes nowhere.
                context.logger.debug("request work cancelled after its deadline")
                return Problem.requestTimeout.response(headers: [.requestID: context.id, .retryAfter: "1"])
            }
            if error.isClientGone {
                // The client went away before it sent the whole request: nobody reads this.
                DroppedRequestLog.shared.log(context.logger, error: error)
                return Problem(status: .badRequest, code: "invalid_request", title: "Invalid request", detail: nil).response()
            }
            var problem = Self.problem(for: error, logger: context.logger)
            if problem.code == Problem.databaseUnavailable.code {
                database.health.reportUnavailable()
            } else if problem.status == 500, await !database.ping(timeout: .milliseconds(300)) {
                // An error no rule knows, while the database does not answer: the outage, not a bug.
                problem = Problem.databaseUnavailable
            }
            problem.instance = request.uri.path
            problem.requestID = context.id
            var headers: HTTPFields = [.requestID: context.id]
            if problem.status == 401 { headers[.wwwAuthenticate] = #"Bearer realm="identitybroker""# }
            if problem.status == 503 { headers[.retryAfter] = "1" }
            if problem.status == 429 {
                let limited = (error as? BrokerError) ?? ((error as? ServerError)?.underlyingError as? BrokerError)
                headers[.retryAfter] = limited?.arguments["retry_after"] ?? "1"
                RateLimitMetrics.refused(limited?.arguments["limit"] ?? "api_key")
            }
            if let error = error as? MethodNotAllowed { headers[.allow] = error.allowHeader }
            return problem.response(headers: headers)
        }
    }

    static func problem(for error: any Error, logger: Logger) -> Problem {
        if error.isDatabaseUnavailable || (error as? ServerError)?.underlyingError.isDatabaseUnavailable == true {
            // A database that is down, restarting, dropping connections or out of time: the
            // statement rolled back (decision 0015).
            logger.warning("database unavailable", metadata: ["error": "\(String(describing: type(of: error)))"])
            return Problem.databaseUnavailable
        }
        if error.isRefusedRequestValue || (error as? ServerError)?.underlyingError.isRefusedRequestValue == true {
            return Problem(
                status: .badRequest, code: "invalid_request", title: "Invalid request",
                detail: "A value in the request cannot be stored (a NUL character, or text too long).")
        }
        switch error {
        case let error as MethodNotAllowed:
            return Problem(
                status: .methodNotAllowed, code: "method_not_allowed", title: "Method not allowed",
                detail: "This path allows \(error.allowHeader).")
        case let error as BrokerError:
            if error.kind == .internalFailure { logger.error("request failed", metadata: ["code": "\(error.code)"]) }
            return Problem(error)
        case let error as ServerError:
            if let underlying = error.underlyingError as? BrokerError { return problem(for: underlying, logger: logger) }
            if let underlying = error.underlyingError as? any HTTPResponseError {
                return problem(for: underlying, logger: logger)
            }
            // No operation input: the request could not be read into the operation's input
            // (missing or mistyped members, another content type): the contract, not the server.
            if error.operationInput == nil || error.underlyingError is DecodingError {
                return Problem(
                    status: .badRequest, code: "invalid_request", title: "Invalid request",
                    detail: "The request does not match the API contract (\(error.causeDescription)).")
            }
            logger.error(
                "handler failed",
                metadata: ["operation": "\(error.operationID)", "error": "\(String(describing: type(of: error.underlyingError)))"])
            return Problem(status: .internalServerError, code: "internal_error", title: "Internal error", detail: nil)
        case let error as any HTTPResponseError:
            let (code, title) =
                switch error.status {
                case .notFound: ("not_found", "Not found")
                case .methodNotAllowed: ("method_not_allowed", "Method not allowed")
                case .contentTooLarge: ("payload_too_large", "Request body too large")
                case .badRequest: ("invalid_request", "Invalid request")
                default: ("http_\(error.status.code)", error.status.reasonPhrase)
                }
            return Problem(status: error.status, code: code, title: title, detail: nil)
        default:
            var metadata: Logger.Metadata = ["error": "\(String(describing: type(of: error)))"]
            // Which failure of the database, without a query's values.
            if let database = DatabaseFailureSummary.of(error) { metadata["database"] = "\(database)" }
            logger.error("request failed", metadata: metadata)
            return Problem(status: .internalServerError, code: "internal_error", title: "Internal error", detail: nil)
        }
    }
}

extension Error {
    /// The connection failed under the request (reset, closed) while its body was read.
    var isClientGone: Bool {
        let error = (self as? ServerError)?.underlyingError ?? self
        return error is IOError || error is ChannelError
    }

    /// A cancelled task's error (its request ran out of time), also inside the generated code's wrapper.
    var isCancellation: Bool {
        if self is CancellationError { return true }
        if let error = self as? ServerError { return error.underlyingError is CancellationError }
        return false
    }
}
