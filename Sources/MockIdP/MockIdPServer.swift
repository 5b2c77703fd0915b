import Foundation
import Hummingbird
import JWTKit

/// Serves a ``MockAppleIdP`` over HTTP on loopback.
public enum MockIdPServer {
    public static func router(apple: MockAppleIdP) -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/auth/keys") { _, _ -> Response in
            let (status, body) = try apple.keysAnswer()
            return Response(
                status: .init(code: status), headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: body)))
        }
        router.post("/auth/token") { request, context -> Response in
            let form = String(buffer: try await request.body.collect(upTo: 65_536))
            let tokenRequest = try URLEncodedFormDecoder().decode(MockAppleIdP.TokenRequest.self, from: form)
            switch apple.answer(tokenRequest) {
            case .success(let body):
                return json(.ok, try MockAppleIdP.json(body))
            case .error(let status, let code):
                return json(.init(code: status), try MockAppleIdP.json(["error": .string(code)]))
            }
        }
        router.post("/auth/revoke") { request, _ -> Response in
            let form = String(buffer: try await request.body.collect(upTo: 65_536))
            let revoke = try URLEncodedFormDecoder().decode(RevokeRequest.self, from: form)
            if let token = revoke.token { apple.revoke(token: token) }
            return Response(status: .ok)
        }
        return router
    }

    struct RevokeRequest: Decodable {
        var token: String?
        var client_id: String?
        var client_secret: String?
        var token_type_hint: String?
    }

    static func json(_ status: HTTPResponse.Status, _ body: Data) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// An application listening on 127.0.0.1:`port` (0 picks a free port; `onRunning` tells which).
    public static func application(
        apple: MockAppleIdP, port: Int, onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: router(apple: apple),
            configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "MockIdP"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) }
        )
    }
}
