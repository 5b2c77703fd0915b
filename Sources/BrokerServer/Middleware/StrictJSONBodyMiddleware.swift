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
        guard !parsedByHandlerUnder.contains(where: { path.hasPrefix($0) }), MediaType.isJSON(request.headers[.contentType]) else {
            return try await next(request, context)
        }
        var request = request
        let body = try await request.collectBody(upTo: maxBodyBytes)
        let json: JSONValue
        do {
            json = try JSONValue.parse(body.readableBytesView)
        } catch {
            throw SignInRoute.contractMismatch("the body is not valid JSON (or repeats a member name)")
        }
        // No request schema of the contract allows null; the generated decoders would read a
        // null member as an absent one (schemathesis ST201).
        if let member = Self.nullMember(in: json) {
            throw SignInRoute.contractMismatch("'\(member.prefix(80))' is null: leave an optional member out instead")
        }
        return try await next(request, context)
    }

    /// The path of the first member whose value is null, if any (`a.b[2]`, or `body` for a bare null).
    static func nullMember(in value: JSONValue, at path: String = "") -> String? {
        switch value {
        case .null: return path.isEmpty ? "body" : path
        case .object(let members):
            for key in members.keys.sorted() {
                if let found = nullMember(in: members[key] ?? .null, at: path.isEmpty ? key : "\(path).\(key)") { return found }
            }
            return nil
        case .array(let items):
            for (index, item) in items.enumerated() {
                if let found = nullMember(in: item, at: "\(path)[\(index)]") { return found }
            }
            return nil
        case .bool, .number, .string: return nil
        }
    }
}
