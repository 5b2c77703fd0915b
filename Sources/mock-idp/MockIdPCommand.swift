import ArgumentParser
import BrokerCore
import Crypto
import Foundation
import Hummingbird
import MockIdP

/// `mock-idp`: Apple-, Google- and Facebook-shaped identity providers, and generic OpenID Connect
/// issuers, on loopback, for demos and benchmarks.
@main
struct MockIdPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-idp",
        abstract: "Apple-, Google- and Facebook-shaped identity providers on loopback (tests, demo, benchmarks). Never for production.",
        subcommands: [Serve.self, Mint.self, FacebookToken.self]
    )

    enum Provider: String, ExpressibleByArgument, CaseIterable {
        case apple, google, facebook, oidc
    }

    struct KeyOptions: ParsableArguments {
        @Option(
            help: ArgumentHelp(
                "PEM file holding Apple's signing key (created when missing; default mock-idp-key.pem), shared by serve and "
                    + "mint. Given to serve, it is also the RS256 key of each --oidc issuer (not multi-tenant ones); "
                    + "mint --provider oidc signs with it.",
                valueName: "key-file"))
        var keyFile: String?
        @Option(help: "PEM file holding Google's signing key (default: the key file's name with -google).")
        var googleKeyFile: String?
        @Option(help: "PEM file holding Facebook Limited Login's signing key (default: the key file's name with -facebook).")
        var facebookKeyFile: String?

        var appleURL: URL { URL(fileURLWithPath: keyFile ?? "mock-idp-key.pem") }
        var googleURL: URL { googleKeyFile.map { URL(fileURLWithPath: $0) } ?? sibling("google") }
        var facebookURL: URL { facebookKeyFile.map { URL(fileURLWithPath: $0) } ?? sibling("facebook") }

        /// `dir/name.pem` → `dir/name-<suffix>.pem`.
        private func sibling(_ suffix: String) -> URL {
            let apple = appleURL
            let ext = apple.pathExtension
            let stem = apple.deletingPathExtension().lastPathComponent
            return apple.deletingLastPathComponent().appendingPathComponent(ext.isEmpty ? "\(stem)-\(suffix)" : "\(stem)-\(suffix).\(ext)")
        }
    }

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Serve Apple (/auth/keys, /auth/token, /auth/revoke), Google's and Facebook's key sets, Facebook's Graph, and OpenID Connect issuers.",
            discussion: """
                Routes: /auth/keys, /auth/token, /auth/revoke (Apple); /google/oauth2/v3/certs; \
                /facebook/.well-known/oauth/openid/jwks/; /facebook/graph/debug_token and /facebook/graph/me \
                (also under a version segment such as /facebook/graph/v24.0/me); POST /facebook/test-users \
                with {"app_id", "user_id", "name", "email", "expires_in"} (all but app_id optional) answers \
                {"access_token", "user_id", "app_id", "expires_at"} (see the facebook-token subcommand); \
                POST /mock/faults with e.g. {"facebook.me": "hang"} sets faults (names: apple.keys, apple.token, \
                google.keys, facebook.keys, facebook.debug_token, facebook.me, and per OpenID Connect issuer \
                oidc.<name>.discovery and oidc.<name>.keys). Each --oidc NAME serves a generic OpenID Connect \
                issuer (RS256 and ES256 keys, fresh each run) at /oidc/NAME: discovery at \
                /oidc/NAME/.well-known/openid-configuration, keys at /oidc/NAME/keys. With --key-file, its \
                RS256 key is the key file's RSA key instead (kid mock-oidc-<its RFC 7638 thumbprint>), so \
                'mint --provider oidc --issuer http://127.0.0.1:PORT/oidc/NAME' tokens verify against \
                its keys; its ES256 key stays fresh. --oidc NAME:multi-tenant \
                serves Microsoft Entra ID's shape instead: tokens of tenant T are issued by /oidc/NAME/T/v2.0, \
                discovery at /oidc/NAME/common/v2.0/.well-known/openid-configuration (issuer \
                /oidc/NAME/{tenantid}/v2.0), keys at /oidc/NAME/common/discovery/v2.0/keys.
                """)
        @Option(help: "Port on 127.0.0.1.") var port: Int = 9100
        @OptionGroup var key: KeyOptions
        @Option(help: "A Facebook app registered with Graph (debug_token takes '<app id>|<secret>'); repeat for more apps.")
        var facebookAppID: [String] = ["1000000000001"]
        @Option(help: "The secret of each --facebook-app-id, in order (appsecret_proof is keyed with it).")
        var facebookAppSecret: [String] = ["mock-facebook-app-secret"]
        @Option(
            name: .customLong("oidc"),
            help: ArgumentHelp(
                "Serve a generic OpenID Connect issuer at /oidc/NAME (e.g. line); NAME:multi-tenant for Microsoft "
                    + "Entra ID's shape (e.g. entra:multi-tenant). Repeat for more issuers.",
                valueName: "name[:multi-tenant]"))
        var oidc: [String] = []
        @Option(
            name: .customLong("oidc-web-client"),
            help: ArgumentHelp(
                "A client of every single-tenant --oidc issuer's web flow (its /authorize and /token), with its secret. "
                    + "Repeat for more clients.", valueName: "client-id:secret"))
        var oidcWebClients: [String] = []
        @Flag(help: "Every consent on a web flow's authorize page (Apple's, each --oidc issuer's, Google's) is a new person.")
        var webNewPerson = false
        @Option(
            help: ArgumentHelp(
                "Every consent on a web flow's authorize page is the next of N people in turn: the first N new, then the same N "
                    + "again (returning web sign-ins in a benchmark).", valueName: "N"))
        var webPeople = 0

        func validate() throws {
            for client in oidcWebClients where client.split(separator: ":", maxSplits: 1).count != 2 {
                throw ValidationError("--oidc-web-client takes CLIENT_ID:SECRET, not \(client).")
            }
            guard facebookAppID.count == facebookAppSecret.count else {
                throw ValidationError("Give one --facebook-app-secret per --facebook-app-id.")
            }
            let names = try oidc.map { try Self.oidcIssuer($0).name }
            guard Set(names).count == names.count else { throw ValidationError("Give each --oidc issuer a different name.") }
            guard webPeople >= 0, !(webNewPerson && webPeople > 0) else {
                throw ValidationError("--web-people takes a count of people, and not with --web-new-person.")
            }
        }

        /// `NAME` or `NAME:multi-tenant`.
        static func oidcIssuer(_ value: String) throws -> (name: String, multiTenant: Bool) {
            let parts = value.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            guard parts.count == 1 || parts[1] == "multi-tenant" else {
                throw ValidationError("--oidc takes NAME or NAME:multi-tenant, not \(value).")
            }
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }),
                name != ".", name != ".."
            else { throw ValidationError("An --oidc name holds letters, digits, '-', '_' and '.' only, not \(name).") }
            return (name, parts.count == 2)
        }

        func run() async throws {
            let apple = try MockAppleIdP(keyFile: key.appleURL)
            let google = try MockGoogleIdP(keyFile: key.googleURL)
            apple.webNewPersonEachTime = webNewPerson
            google.web.newPersonEachTime = webNewPerson
            apple.webPeople = webPeople
            google.web.people = webPeople
            let facebook = try MockFacebookIdP(keyFile: key.facebookURL)
            for (appID, secret) in zip(facebookAppID, facebookAppSecret) { facebook.registerApp(appID: appID, secret: secret) }
            let appIDs = facebookAppID.joined(separator: ", ")
            // With --key-file, a single-tenant issuer signs RS256 with the key file's key (which
            // MockAppleIdP created above when missing), so `mint --provider oidc` tokens verify.
            let oidcKeyFile = key.keyFile == nil ? nil : key.appleURL
            let issuers = try oidc.map { value in
                let (name, multiTenant) = try Self.oidcIssuer(value)
                let issuer = try MockOIDCIssuer(name: name, multiTenant: multiTenant, keyFile: multiTenant ? nil : oidcKeyFile)
                issuer.web.newPersonEachTime = webNewPerson
                issuer.web.people = webPeople
                for client in oidcWebClients {
                    let parts = client.split(separator: ":", maxSplits: 1)
                    issuer.registerWebClient(String(parts[0]), secret: String(parts[1]))
                }
                return issuer
            }
            let app = MockIdPServer.application(apple: apple, google: google, facebook: facebook, oidc: issuers, port: port) { port in
                let base = "http://127.0.0.1:\(port)"
                let oidcLines = issuers.map { issuer in
                    let shape = issuer.isMultiTenant ? " (multi-tenant; discovery names {tenantid})" : ""
                    return "OpenID Connect issuer \(issuer.name)\(shape): \(issuer.issuer(base: base)) "
                        + "discovery \(issuer.discoveryURL(base: base)) keys \(issuer.jwksURL(base: base))\n"
                }
                let banner = """
                    mock-idp listening on \(base) (BROKER_APPLE_BASE_URL)
                    BROKER_GOOGLE_JWKS_URL=\(MockGoogleIdP.jwksURL(base: base))
                    BROKER_FACEBOOK_JWKS_URL=\(MockFacebookIdP.jwksURL(base: base))
                    BROKER_FACEBOOK_GRAPH_URL=\(MockFacebookIdP.graphURL(base: base))
                    Facebook apps registered: \(appIDs); classic access tokens: POST \(MockFacebookIdP.testUsersURL(base: base))
                    \(oidcLines.joined())
                    """
                FileHandle.standardOutput.write(Data(banner.utf8))
            }
            try await app.runService()
        }
    }

    struct Mint: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print identity tokens, one per line, signed with the key file.",
            discussion: """
                Token i is for subject PREFIX((FIRST + i) mod SUBJECTS). With --with-nonce each line is \
                "<token> <raw nonce>", which also makes every token distinct: an Apple token carries the \
                SHA-256 hex of its own random raw nonce (an Apple client's default nonce mode), a Google, \
                Facebook or OpenID Connect token the raw nonce itself. --provider google mints Google id \
                tokens (aud and azp the audience), --provider facebook Limited Login tokens (aud the app \
                id), --provider oidc id tokens of the generic OpenID Connect issuer --issuer (required; \
                e.g. http://127.0.0.1:9100/oidc/line for 'serve --oidc line --key-file K'): RS256 with \
                the key file's RSA key and the kid serve gives it, iss the issuer, aud the audience (the \
                client id), no azp, email user<N>@example.com (verified) and name. Classic Facebook \
                access tokens live in the serving process: see facebook-token.
                """)
        @Option(help: "Whose tokens.") var provider: Provider = .apple
        @Option(name: [.long, .customLong("app-id")], help: "The client id (token aud); for facebook the app id.")
        var audience: String
        @Option(help: "How many tokens.") var count: Int = 1
        @Option(help: "Subject prefix (default: apple 000001.mock., google 1000000, facebook 2000000, oidc 3000000).")
        var subjectPrefix: String?
        @Option(help: "How many distinct subjects the tokens cycle through (default: --count).") var subjects: Int?
        @Option(help: "The subject number of the first token.") var first: Int = 0
        @Flag(help: "Give each token a random nonce and print it after the token.") var withNonce = false
        @Option(help: "Token lifetime in seconds.") var lifetime: Int = 86_400
        @Option(help: "Google only: the hosted domain (hd).") var hostedDomain: String?
        @Option(help: "Google only: azp (default: the audience).") var authorizedParty: String?
        @Option(
            help: ArgumentHelp(
                "google: iss (default https://accounts.google.com; accounts.google.com is Google's other form). "
                    + "oidc (required): the issuer URL, as served, e.g. http://127.0.0.1:9100/oidc/line."))
        var issuer: String?
        @Option(
            help: ArgumentHelp(
                "apple only: print Apple server-to-server notifications of this event type (consent-revoked, account-delete, "
                    + "email-disabled, email-enabled) instead of identity tokens, one JSON body {\"payload\": \"<JWS>\"} per line, "
                    + "the audience (a primary App ID) as aud, each with its own jti."))
        var notification: String?
        @OptionGroup var key: KeyOptions

        func validate() throws {
            guard notification == nil || provider == .apple else {
                throw ValidationError("--notification applies to --provider apple only.")
            }
            guard count >= 0, first >= 0, (subjects ?? 1) > 0 else {
                throw ValidationError("--count and --first must not be negative; --subjects must be positive.")
            }
            guard provider == .google || (hostedDomain == nil && authorizedParty == nil) else {
                throw ValidationError("--hosted-domain and --authorized-party apply to --provider google only.")
            }
            guard provider == .google || provider == .oidc || issuer == nil else {
                throw ValidationError("--issuer applies to --provider google and oidc only.")
            }
            guard provider != .oidc || !(issuer ?? "").isEmpty else {
                throw ValidationError("--provider oidc needs --issuer, the issuer URL (e.g. http://127.0.0.1:9100/oidc/line).")
            }
        }

        func run() async throws {
            let mint = try minter()
            let cycle = subjects ?? max(count, 1)
            // RSA signing dominates: sign in one chunk per core, print in order.
            let workers = max(1, ProcessInfo.processInfo.activeProcessorCount)
            let chunk = (count + workers - 1) / max(workers, 1)
            let (count, first, withNonce) = (count, first, withNonce)
            let parts = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for worker in 0..<workers where worker * chunk < count {
                    group.addTask {
                        var output = ""
                        for index in (worker * chunk)..<min(count, (worker + 1) * chunk) {
                            let raw = withNonce ? Hex.encode(SecureRandom.bytes(16)) : nil
                            let token = try mint((first + index) % cycle, raw)
                            output += raw.map { "\(token) \($0)\n" } ?? "\(token)\n"
                        }
                        return (worker, output)
                    }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            for worker in parts.keys.sorted() { FileHandle.standardOutput.write(Data((parts[worker] ?? "").utf8)) }
        }

        /// Mints the token for subject number `number` with raw nonce `raw`.
        private func minter() throws -> @Sendable (_ number: Int, _ raw: String?) throws -> String {
            let (audience, lifetime) = (audience, TimeInterval(lifetime))
            switch provider {
            case .apple:
                let apple = try MockAppleIdP(keyFile: key.appleURL)
                let prefix = subjectPrefix ?? "000001.mock."
                if let type = notification {
                    return { number, _ in
                        String(
                            decoding: try apple.notificationBody(audience: audience, type: type, subject: "\(prefix)\(number)"),
                            as: UTF8.self)
                    }
                }
                return { number, raw in
                    try apple.mint(
                        apple.claims(
                            subject: "\(prefix)\(number)", audience: audience,
                            nonce: raw.map { Hex.encode(SHA256.hash(data: Data($0.utf8))) },
                            email: "user\(number)@example.com", lifetime: lifetime))
                }
            case .google:
                let google = try MockGoogleIdP(keyFile: key.googleURL)
                let (prefix, party, domain) = (subjectPrefix ?? "1000000", authorizedParty, hostedDomain)
                let iss = issuer ?? MockGoogleIdP.issuer
                return { number, raw in
                    try google.mint(
                        google.claims(
                            subject: "\(prefix)\(number)", audience: audience, authorizedParty: party, nonce: raw,
                            email: "user\(number)@example.com", hostedDomain: domain, name: "Mock User\(number)", issuer: iss,
                            lifetime: lifetime))
                }
            case .facebook:
                let facebook = try MockFacebookIdP(keyFile: key.facebookURL)
                let prefix = subjectPrefix ?? "2000000"
                return { number, raw in
                    try facebook.mint(
                        facebook.claims(
                            subject: "\(prefix)\(number)", appID: audience, nonce: raw, email: "user\(number)@example.com",
                            name: "Mock User\(number)", lifetime: lifetime))
                }
            case .oidc:
                // Signs with the key file's RSA key under the kid `serve --key-file` gives it; the
                // issuer's name plays no part in the token (iss is --issuer).
                let signer = try MockOIDCIssuer(name: "mint", algorithms: [.rs256], keyFile: key.appleURL)
                let (prefix, iss) = (subjectPrefix ?? "3000000", issuer ?? "")
                return { number, raw in
                    try signer.mintIDToken(
                        base: iss, subject: "\(prefix)\(number)", audience: audience, nonce: raw, email: "user\(number)@example.com",
                        emailVerified: true, name: "Mock User\(number)", issuer: iss, lifetime: lifetime, algorithm: .rs256)
                }
            }
        }
    }
}
