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

    enum CodingKeys: String, CodingKey {
        case type, title, status, detail, instance, code, hint
        case requestID = "request_id"
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
        self.hint = error.hint
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

extension BrokerError.Kind {
    var httpStatus: HTTPResponse.Status {
        switch self {
        case .badRequest: .badRequest
        case .unauthorized: .unauthorized
        case .forbidden: .forbidden
        case .notFound: .notFound
        case .conflict: .conflict
        case .unavailable: .serviceUnavailable
        case .internalError: .internalServerError
        }
    }
}
