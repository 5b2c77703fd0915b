import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird

/// An RFC 9457 problem, rendered as `application/problem+json`.
struct Problem: Encodable, Sendable {
    var type: String
    var title: String
    var status: Int
    var detail: String?
    var instance: String?
    var code: String
    /// What to do about it, when the broker knows.
    var hint: String?
    var requestID: String?
    /// Extension members (RFC 9457 §3.2); never one of the names above.
    var extensions: [String: String] = [:]

    enum CodingKeys: String, CodingKey {
        case type, title, status, detail, instance, code, hint
        case requestID = "request_id"
    }

    private struct ExtensionKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        try container.encode(title, forKey: .title)
        try container.encode(status, forKey: .status)
        try container.encodeIfPresent(detail, forKey: .detail)
        try container.encodeIfPresent(instance, forKey: .instance)
        try container.encode(code, forKey: .code)
        try container.encodeIfPresent(hint, forKey: .hint)
        try container.encodeIfPresent(requestID, forKey: .requestID)
        let standard = Set(["type", "title", "status", "detail", "instance", "code", "hint", "request_id"])
        var others = encoder.container(keyedBy: ExtensionKey.self)
        for (name, value) in extensions where !standard.contains(name) {
            try others.encode(value, forKey: ExtensionKey(stringValue: name))
        }
    }

    init(status: HTTPResponse.Status, code: String, title: String, detail: String?) {
        self.type = "urn:identitybroker:problem:\(code)"
        self.title = title
        self.status = status.code
        self.detail = detail
        self.code = code
    }

    init(_ error: BrokerError) {
        self.init(status: error.kind.httpStatus, code: error.code, title: error.title, detail: error.detail)
        self.hint = error.hint ?? Self.hint(for: error)
        self.extensions = error.extensions
    }

    /// The hint an API caller gets for a failure the layers below report as a meaning: what the
    /// backend, or the operator it asks, can do about it.
    static func hint(for error: BrokerError) -> String? {
        switch error.code {
        case "tenant_disabled": "An operator can re-enable it with 'broker tenant enable <slug>'."
        case "insufficient_scope":
            "Ask an operator for a key with it: broker api-key create --tenant <slug> --scopes \(error.arguments["scope"] ?? "<scope>")"
        case "no_active_signing_key": "An operator creates one with 'broker keys rotate --tenant <slug>'."
        case "secret_unreadable": "An operator checks that BROKER_MASTER_KEY is the key this database was written with."
        default: nil
        }
    }

    func response(headers extra: HTTPFields = [:]) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = (try? encoder.encode(self)) ?? Data(#"{"code":"internal_error","status":500}"#.utf8)
        var headers = extra
        headers[.contentType] = "application/problem+json"
        headers[.cacheControl] = "no-store"
        return Response(
            status: HTTPResponse.Status(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// The one mapping of a failure's meaning to an HTTP status (the CLI's is its exit code).
extension BrokerError.Kind {
    var httpStatus: HTTPResponse.Status {
        switch self {
        case .invalidInput: .badRequest
        case .unauthenticated: .unauthorized
        case .notPermitted: .forbidden
        case .notFound: .notFound
        case .conflict: .conflict
        case .unavailable: .serviceUnavailable
        case .rateLimited: .tooManyRequests
        case .internalFailure: .internalServerError
        }
    }
}
