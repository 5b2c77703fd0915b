import BrokerAPI
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `POST /v1/sign-in/apple` served on the router directly rather than through the generated
/// server code (decision 0011): the hottest route of the broker, where the generic request and
/// response plumbing and `JSONEncoder` cost more than verifying the identity token. The
/// contract is still openapi.yaml's: the body decodes into the generated
/// `AppleSignInRequest` (so the same fields are required and the same enums checked), the
/// response is the generated `SignInResponse` written by ``Components/Schemas/SignInResponse/json``,
/// and errors are the same problem details. As with the generated code, a body that does not
/// match the contract is refused before the API key is looked at.
struct AppleSignInRoute: Sendable {
    static let operation = GeneratedRoutes.Operation(method: .post, path: "/v1/sign-in/apple")

    let handlers: APIHandlers
    let maxBodyBytes: Int
    private static let decoder = JSONDecoder()

    func respond(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        try Self.checkContentType(request.headers[.contentType])
        var request = request
        let body = try await request.collectBody(upTo: maxBodyBytes)
        let input: Components.Schemas.AppleSignInRequest
        do {
            input = try Self.decoder.decode(Components.Schemas.AppleSignInRequest.self, from: Data(body.readableBytesView))
        } catch {
            throw Self.contractMismatch(Self.describe(error))
        }
        let response = try await handlers.signInWithApple(input)
        return Response(
            status: .ok,
            headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: response.json)))
    }

    /// JSON, or no content type at all (the generated code assumes its only one then).
    /// Compared on the bytes: Foundation's trimming and lowercasing cost ~10 µs a request.
    static func checkContentType(_ value: String?) throws {
        guard let value else { return }
        var mediaType = Substring(value).utf8.prefix { $0 != UInt8(ascii: ";") }
        while let first = mediaType.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") {
            mediaType = mediaType.dropFirst()
        }
        while let last = mediaType.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") {
            mediaType = mediaType.dropLast()
        }
        let accepted = ["application/json", "*/*", "application/*"].contains { expected in
            expected.utf8.count == mediaType.count
                && zip(expected.utf8, mediaType).allSatisfy { expected, byte in
                    // ASCII case folding: media types are case-insensitive.
                    expected == (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte)
                }
        }
        guard accepted else {
            throw contractMismatch("expected content type application/json, got '\(value.prefix(80))'")
        }
    }

    static func contractMismatch(_ detail: String) -> BrokerError {
        BrokerError(
            code: "invalid_request", kind: .badRequest, title: "Invalid request",
            detail: "The request does not match the API contract (\(detail)).")
    }

    /// Where the body went wrong, without echoing its values.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "the body is not valid JSON" }
        let path: (DecodingError.Context) -> String = { context in
            context.codingPath.map(\.stringValue).joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            let parent = path(context)
            return "missing member '\(parent.isEmpty ? key.stringValue : parent + "." + key.stringValue)'"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "member '\(path(context))' has the wrong type"
        case .dataCorrupted(let context):
            let at = path(context)
            return at.isEmpty ? "the body is not a JSON object" : "member '\(at)' has a value the contract does not allow"
        @unknown default:
            return "the body does not decode"
        }
    }
}
