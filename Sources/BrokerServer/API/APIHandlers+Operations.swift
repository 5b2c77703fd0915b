import BrokerAPI
import HTTPTypes
import OpenAPIRuntime
import Providers
import Storage

/// Health, readiness and metrics.
extension APIHandlers {
    func getHealth(_ input: Operations.GetHealth.Input) async throws -> Operations.GetHealth.Output {
        .ok(.init(body: .json(.init(status: .ok))))
    }

    func getReadiness(_ input: Operations.GetReadiness.Input) async throws -> Operations.GetReadiness.Output {
        guard await services.database.ping() else {
            var problem = Problem(
                status: .serviceUnavailable, code: "database_unavailable", title: "Database unavailable",
                detail: "The broker cannot reach its PostgreSQL database.")
            problem.requestID = RequestInfo.current?.requestID
            return .serviceUnavailable(.init(body: .applicationProblemJson(problem.schema)))
        }
        // A cold instance that has never fetched Apple's keys cannot check any Apple sign-in
        // (decision 0019); once fetched, cached keys keep it ready while Apple is down.
        guard services.appleKeys.isUsable else {
            var problem = Problem(
                status: .serviceUnavailable, code: "provider_unavailable", title: "Apple keys unavailable",
                detail: "The broker has not fetched Apple's signing keys yet (it retries every second).")
            problem.requestID = RequestInfo.current?.requestID
            return .serviceUnavailable(.init(body: .applicationProblemJson(problem.schema)))
        }
        return .ok(.init(body: .json(.init(status: .ok))))
    }

    func getMetrics(_ input: Operations.GetMetrics.Input) async throws -> Operations.GetMetrics.Output {
        .ok(.init(body: .plainText(HTTPBody(BrokerMetrics.render()))))
    }
}

extension Problem {
    /// The generated schema type of this problem, for typed error responses.
    var schema: Components.Schemas.Problem {
        .init(
            _type: type, title: title, status: status, detail: detail, instance: instance, code: code, hint: hint,
            requestId: requestID)
    }
}
