import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird

/// Every JSON request body goes through the one strict parser (``JSONValue/parse(_:maxDepth:)``:
/// duplicate member names, NUL characters, invalid UTF-8 and trailing text refused) before a
/// handler reads it, with the same problem the sign-in route gives for a bad body. The
/// generated decoders keep one of two duplicates silently; two readers of one body must never
/// see different values. Routes that parse with the strict parser themselves are skipped.
struct StrictJSONBodyMiddleware: RouterMiddleware {
    typealias Context = BrokerRequestContext
    let maxBodyBytes: Int
    /// Path prefixes whose handlers already parse their body strictly.
    let parsedByHandlerUnder: [String]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let path = request.uri.path
        guard !parsedByHandlerUnder.contains(where: { path.hasPrefix($0) }), Self.isJSON(request.headers[.contentType]) else {
            return try await next(request, context)
        }
        var request = request
        let body = try await request.collectBody(upTo: maxBodyBytes)
        do {
            _ = try JSONValue.parse(body.readableBytesView)
        } catch {
            throw SignInRoute.contractMismatch("the body is not valid JSON (or repeats a member name)")
        }
        return try await next(request, context)
    }

    /// `application/json` or any `+json` media type, parameters ignored.
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let mediaType = contentType.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces).lowercased()
        return mediaType == "application/json" || mediaType.hasSuffix("+json")
    }
}
