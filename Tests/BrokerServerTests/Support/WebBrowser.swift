import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import Providers

/// A person's browser in the web flow tests: a real HTTP client (AsyncHTTPClient) that follows
/// redirects one at a time and submits the self-posting forms Apple's authorize page answers.
/// Requests for the broker (its public URL, or a product domain that forwards to it) go to the
/// broker under test through its test client; everything else over loopback HTTP.
struct WebBrowser {
    let broker: any TestClientProtocol
    /// The origins that are the broker (`TestApp.publicURL`, a product's forwarding domain).
    let brokerOrigins: [String]

    struct Page {
        let status: Int
        let location: String?
        let body: String
    }

    /// A client that never follows a redirect itself (the browser follows them one by one).
    /// Process-wide, like `HTTPClient.shared`, so never shut down.
    static let client = HTTPClient(
        eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))

    /// GET on a URL outside the broker, without following its redirect.
    static func get(_ url: String) async throws -> Page {
        var request = HTTPClientRequest(url: url)
        request.method = .GET
        let response = try await client.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        return Page(status: Int(response.status.code), location: response.headers.first(name: "Location"), body: String(buffer: body))
    }

    /// Sends a request to the broker when `url` is the broker's, else over HTTP.
    func visit(_ url: String) async throws -> Page {
        if let path = brokerPath(url) {
            let response = try await broker.execute(uri: path, method: .get, headers: [:], body: nil)
            return Page(status: Int(response.status.code), location: response.headers[.location], body: String(buffer: response.body))
        }
        return try await Self.get(url)
    }

    /// Posts a form to the broker's path for `action`.
    func submit(action: String, fields: [(String, String)]) async throws -> Page {
        let path = brokerPath(action) ?? action
        let response = try await broker.execute(
            uri: path, method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
            body: ByteBuffer(string: Self.form(fields)))
        return Page(status: Int(response.status.code), location: response.headers[.location], body: String(buffer: response.body))
    }

    /// Follows redirects and self-posting forms from `url` until the browser is sent to
    /// `returnURL` (returned: the whole URL it was sent to) or a page ends the journey (thrown).
    func follow(_ url: String, until returnURL: String) async throws -> String {
        var next = url
        for _ in 0..<8 {
            let page = try await visit(next)
            if let location = page.location, (300..<400).contains(page.status) {
                if location.hasPrefix(returnURL) { return location }
                next = location
                continue
            }
            if page.status == 200, let form = Self.form(in: page.body) {
                let answer = try await submit(action: form.action, fields: form.fields)
                guard let location = answer.location, (300..<400).contains(answer.status) else {
                    throw Stopped(status: answer.status, body: answer.body)
                }
                if location.hasPrefix(returnURL) { return location }
                next = location
                continue
            }
            throw Stopped(status: page.status, body: page.body)
        }
        throw Stopped(status: 0, body: "too many redirects")
    }

    struct Stopped: Error, CustomStringConvertible {
        let status: Int
        let body: String
        var description: String { "the browser stopped at HTTP \(status): \(body.prefix(300))" }
    }

    func brokerPath(_ url: String) -> String? {
        for origin in brokerOrigins where url.hasPrefix(origin) { return String(url.dropFirst(origin.count)) }
        return url.hasPrefix("/") ? url : nil
    }

    /// The action and hidden fields of the first form of a page (the mock's markup: attributes
    /// in double quotes, `&amp;`, `&quot;`, `&lt;`, `&gt;` escaped).
    static func form(in html: String) -> (action: String, fields: [(String, String)])? {
        guard let actionRange = html.range(of: "action=\"") else { return nil }
        let action = unescape(String(html[actionRange.upperBound...].prefix { $0 != "\"" }))
        var fields: [(String, String)] = []
        var rest = html[actionRange.upperBound...]
        while let input = rest.range(of: "<input type=\"hidden\" name=\"") {
            let name = rest[input.upperBound...].prefix { $0 != "\"" }
            guard let valueStart = rest[input.upperBound...].range(of: "value=\"") else { break }
            let value = rest[valueStart.upperBound...].prefix { $0 != "\"" }
            fields.append((unescape(String(name)), unescape(String(value))))
            rest = rest[valueStart.upperBound...]
        }
        return (action, fields)
    }

    static func unescape(_ text: String) -> String {
        text.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&lt;", with: "<")
            .replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&amp;", with: "&")
    }

    static func form(_ fields: [(String, String)]) -> String { FormEncoding.encode(fields) }

    /// The query parameters of a URL.
    static func query(_ url: String) -> [String: String] {
        var result: [String: String] = [:]
        for item in URLComponents(string: url)?.queryItems ?? [] { result[item.name] = item.value }
        return result
    }
}
