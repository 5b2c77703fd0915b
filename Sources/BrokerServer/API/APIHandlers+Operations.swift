import BrokerApplication
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
        // Stopping: out of rotation for the drain, while requests are still served.
        guard !services.drain.isDraining else {
            var problem = Problem(
                status: .serviceUnavailable, code: "shutting_down", title: "Shutting down",
                detail: "This instance is stopping; it still answers requests for BROKER_DRAIN_SECONDS, then stops.")
            problem.requestID = RequestInfo.current?.requestID
            return .serviceUnavailable(.init(body: .applicationProblemJson(problem.schema)))
        }
        guard await services.database.ping() else {
            var problem = Problem(
                status: .serviceUnavailable, code: "database_unavailable", title: "Database unavailable",
                detail: "The broker cannot reach its PostgreSQL database.")
            problem.requestID = RequestInfo.current?.requestID
            return .serviceUnavailable(.init(body: .applicationProblemJson(problem.schema)))
        }
        // Readiness is this instance's own health: a provider's key state is reported, never a
        // reason to take the instance out of a load balancer (decision 0036).
        let providers = services.keySets.states().compactMapValues { Components.Schemas.ProviderKeySetState(rawValue: $0.rawValue) }
        return .ok(.init(body: .json(.init(status: .ok, providers: .init(additionalProperties: providers)))))
    }

    func getMetrics(_ input: Operations.GetMetrics.Input) async throws -> Operations.GetMetrics.Output {
        .ok(.init(body: .plainText(HTTPBody(BrokerMetrics.render(keySets: services.keySets.states())))))
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
