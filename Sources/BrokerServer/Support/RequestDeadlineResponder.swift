import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Storage

/// Answers every request by its deadline (decision 0015). The router runs in a task of its own;
/// when the deadline passes first the client gets a 503 problem with `Retry-After` at once:
/// `database_unavailable` when the database does not answer a ping, or was seen unreachable
/// while the request ran (it waited on the outage, even if the database is back by now;
/// decision 0032), else `request_timeout`; 408 `request_body_timeout` when the request was still
/// waiting for its client to send the rest of its body (the client's failure, counted, not
/// logged one by one). Nothing the request waits on (a pool connection, a statement on a
/// connection that died without a word, a provider) can hold the client or graceful shutdown.
struct RequestDeadlineResponder<Inner: HTTPResponder>: HTTPResponder where Inner.Context == BrokerRequestContext {
    typealias Context = BrokerRequestContext

    let inner: Inner
    let timeout: Duration
    let database: Database

    @Sendable func respond(to request: Request, context: Context) async throws -> Response {
        let inner = inner
        let started = ContinuousClock.now
        let body = RequestBodyWatch()
        do {
            // Outbound calls the request waits on end before its deadline (RequestBudget).
            return try await RequestBudget.$deadline.withValue(started.advanced(by: timeout)) {
                try await RequestBodyWatch.$current.withValue(body) {
                    try await withDeadline(timeout, executorPreference: EventLoopTaskExecutor.executor(for: context.eventLoop)) {
                        try await inner.respond(to: request, context: context)
                    }
                }
            }
        } catch is DeadlineExceeded {
            if body.isReading {
                // The client sent part of its request and stopped (issue 39 F19): its failure,
                // logged at debug and counted, as dropped requests are.
                DroppedRequestLog.unfinishedBodies.log(context.logger, error: nil)
                var problem = Problem.requestBodyTimeout
                problem.instance = request.uri.path
                problem.requestID = context.id
                return problem.response(headers: [.requestID: context.id])
            }
            let databaseUp = await database.ping(timeout: .milliseconds(300)) && !database.health.wasUnavailable(since: started)
            // A browser's page and an OAuth client's endpoint are answered in their own form.
            if let answer = Self.ownFormAnswer(request) {
                context.logger.warning("request deadline passed", metadata: ["database_up": "\(databaseUp)"])
                return answer
            }
            var problem = databaseUp ? Problem.requestTimeout : Problem.databaseUnavailable
            problem.instance = request.uri.path
            problem.requestID = context.id
            context.logger.warning("request deadline passed", metadata: ["code": "\(problem.code)"])
            return problem.response(headers: [.requestID: context.id, .retryAfter: "1"])
        }
    }
}

extension RequestDeadlineResponder {
    /// The 503 of a route that answers a person's browser (the web callbacks, the authorization
    /// endpoint: a page) or an OAuth client (the token and userinfo endpoints: RFC 6749 JSON
    /// `temporarily_unavailable`), rather than a problem; nil for every other route.
    static func ownFormAnswer(_ request: Request) -> Response? {
        let path = request.uri.path
        if path == WebSignInRoute.appleCallbackPath || path == WebSignInRoute.oidcCallbackPath {
            return WebSignInRoute.page(.serviceUnavailable)
        }
        return OpenIDProviderRoute.guardAnswer(request, .temporarilyUnavailable, page: .unavailable)
    }
}

extension Problem {
    /// 408 `request_body_timeout`: the client sent part of its request and not the rest
    /// before the request's deadline.
    static var requestBodyTimeout: Problem {
        Problem(
            status: .requestTimeout, code: "request_body_timeout", title: "Request body not received",
            detail: "The client did not send the whole request body within the broker's request deadline.")
    }

    /// 503 `request_timeout` (sent with `Retry-After`): the request's deadline passed.
    static var requestTimeout: Problem {
        Problem(
            status: .serviceUnavailable, code: "request_timeout", title: "Request timed out",
            detail: "The broker could not answer within its request deadline.")
    }

    /// 503 `database_unavailable` (sent with `Retry-After`).
    static var databaseUnavailable: Problem {
        Problem(
            status: .serviceUnavailable, code: "database_unavailable", title: "Database unavailable",
            detail: "The broker's PostgreSQL database is down, restarting or not answering in time.")
    }
}
