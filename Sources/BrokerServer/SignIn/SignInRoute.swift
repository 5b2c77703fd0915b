import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `POST /v1/sign-in/{provider}` served on the router directly rather than through the
/// generated server code (decision 0011): the hottest routes of the broker, where the generic
/// request and response plumbing, `JSONDecoder` and `JSONEncoder` cost more than verifying the
/// identity token. The contract is still openapi.yaml's: each provider's body is read into its
/// generated request type the way its `Decodable` conformance reads it (the same members
/// required, the same enums checked), the response is the generated `SignInResponse` written by
/// ``Components/Schemas/SignInResponse/json``, and errors are the same problem details. An id
/// the calling tenant never configured is 404 `unknown_provider` (decision 0034). As with the generated code, a body
/// that does not match the contract is refused before the API key is looked up (a request with
/// no key at all is refused first, by ``APIKeyFirstMiddleware``); unlike it, so is a body that
/// repeats a member name.
struct SignInRoute: Sendable {
    /// The router's path; `{provider}` in the contract.
    static let routerPath = "/v1/sign-in/:provider"
    static let pathPrefix = "/v1/sign-in/"
    /// The contract's operations this route serves (not registered from the generated code).
    static let operations: [GeneratedRoutes.Operation] = [
        .init(method: .post, path: "/v1/sign-in/apple"), .init(method: .post, path: "/v1/sign-in/google"),
        .init(method: .post, path: "/v1/sign-in/facebook"), .init(method: .post, path: "/v1/sign-in/{provider}"),
    ]

    let handlers: APIHandlers
    let maxBodyBytes: Int

    func respond(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        let name = context.parameters.get("provider") ?? ""
        guard let provider = ProviderID(rawValue: name) else { throw SignInProblems.problem(.unknownProvider(name)) }
        try Self.checkContentType(request.headers[.contentType])
        var request = request
        let bytes = try await request.collectBody(upTo: maxBodyBytes)
        let json: JSONValue
        do {
            json = try JSONValue.parse(bytes.readableBytesView)
        } catch {
            throw Self.contractMismatch("the body is not valid JSON (or repeats a member name)")
        }
        let response = try await handlers.signIn(provider: provider, json: json, as: HTTPCaller(request, context: context))
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
            code: "invalid_request", kind: .invalidInput, title: "Invalid request",
            detail: "The request does not match the API contract (\(detail)).")
    }
}
