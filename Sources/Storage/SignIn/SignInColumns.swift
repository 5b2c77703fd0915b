import BrokerCore
import Foundation

/// The column table of a sign-in: every column a sign-in posts, and every column it writes on
/// an identity, an account and a session, each once. The posted record set's type and writer
/// (``PostedSignIns``) and every `INSERT` and `SET` list of the sign-in statements
/// (``SignInRules``) are made from it. A new identity column is one entry in ``identity`` plus
/// its migration (docs/architecture.md walks a sign-in through it).
enum SignInColumns {
    /// One sign-in as the statements receive it: its place in the batch, the request, and the
    /// ids a new identity and a new account would take (nil where the statement creates none).
    struct Element: Sendable {
        let n: Int
        let request: SignInRequest
        var newIDs: (identity: UUID, account: UUID)?
    }

    /// A member of each posted element, a column of `posted p`: its name (the JSON member's
    /// and the column's), the type JSON carries it as, the SQL that makes the column from the
    /// JSON record `r`, and how the element's value is written.
    struct Posted: Sendable {
        let name: String
        let jsonType: String
        let sql: String
        let write: @Sendable (inout JSONWriter, Element) -> Void

        static func text(_ name: String, sql: String? = nil, _ value: @escaping @Sendable (Element) -> String?) -> Posted {
            Posted(name: name, jsonType: "text", sql: sql ?? "r.\(name)") { writer, element in writer.member(name, value(element)) }
        }

        static func uuid(_ name: String, _ value: @escaping @Sendable (Element) -> UUID?) -> Posted {
            Posted(name: name, jsonType: "uuid", sql: "r.\(name)") { writer, element in
                writer.member(name, value(element)?.lowercasedString)
            }
        }

        static func int(_ name: String, type: String = "int8", sql: String? = nil, _ value: @escaping @Sendable (Element) -> Int?)
            -> Posted
        {
            Posted(name: name, jsonType: type, sql: sql ?? "r.\(name)") { writer, element in writer.member(name, value(element)) }
        }

        static func bool(_ name: String, _ value: @escaping @Sendable (Element) -> Bool) -> Posted {
            Posted(name: name, jsonType: "bool", sql: "r.\(name)") { writer, element in writer.member(name, value(element)) }
        }

        /// A point in time, posted as microseconds since 1970 (exact, ``UnixTime``).
        static func time(_ name: String, _ value: @escaping @Sendable (Element) -> Date?) -> Posted {
            int(name, sql: "to_timestamp(r.\(name)::float8 / 1000000)") { value($0).map(UnixTime.microseconds) }
        }

        /// Bytes, posted as lowercase hex.
        static func bytes(_ name: String, _ value: @escaping @Sendable (Element) -> Data?) -> Posted {
            text(name, sql: "decode(r.\(name), 'hex')") { value($0).map { Hex.encode($0) } }
        }
    }

    /// How a sign-in writes a column of a stored row from the value it brings, and when the
    /// stored row already holds what it brings (the quiet test: a sign-in all of whose columns
    /// are quiet writes no identity or account row, decision 0013).
    enum Rule: Sendable, Equatable {
        /// A value brought replaces the stored one; none keeps it. Quiet when none is brought
        /// or the stored value equals it (and each follower's equals its own).
        case replaceWhenBrought
        /// As ``replaceWhenBrought``, but a value brought is never quiet: it is new each time
        /// (a sealed provider refresh token).
        case replaceAlwaysNew
        /// Written as its leader: the brought value when the leader's is brought, else the
        /// stored one; compared in the leader's quiet test.
        case follows(String)
        /// A value brought fills the column only when it is empty. Quiet when none is brought
        /// or one is stored.
        case fillWhenEmpty
        /// A JSON object brought is merged into the stored one (its members replace the stored
        /// members of their names). Quiet when the stored object contains it.
        case merge
    }

    /// A column a sign-in writes: its name, the value the sign-in brings for it as SQL read
    /// from the row of the given alias, and its rule.
    struct Written: Sendable {
        let name: String
        let value: @Sendable (_ from: String) -> String
        let rule: Rule
    }

    /// An identity column a sign-in writes from what the token brings: posted as a member of
    /// the element of the same name (`p.<name>`), or made from other members (`derived`).
    struct IdentityColumn: Sendable {
        let posted: Posted?
        let written: Written

        init(_ posted: Posted, _ rule: Rule) {
            self.posted = posted
            self.written = Written(name: posted.name, value: { "\($0).\(posted.name)" }, rule: rule)
        }

        init(_ name: String, derived value: @escaping @Sendable (_ p: String) -> String, _ rule: Rule) {
            self.posted = nil
            self.written = Written(name: name, value: value, rule: rule)
        }
    }

    /// The identity columns a sign-in writes. Empty strings are posted as NULL: they never
    /// blank what is stored.
    static let identity: [IdentityColumn] = [
        IdentityColumn(.text("email") { nonEmpty($0.request.email) }, .replaceWhenBrought),
        IdentityColumn(.bool("email_verified") { $0.request.emailVerified }, .follows("email")),
        IdentityColumn(.bool("is_private_email") { $0.request.isPrivateEmail }, .follows("email")),
        IdentityColumn(.text("given_name") { nonEmpty($0.request.name.givenName) }, .fillWhenEmpty),
        IdentityColumn(.text("family_name") { nonEmpty($0.request.name.familyName) }, .fillWhenEmpty),
        IdentityColumn(.int("real_user_status") { $0.request.realUserStatus }, .replaceWhenBrought),
        IdentityColumn(
            .bytes("provider_refresh_token_sealed") { $0.request.sealedProviderRefreshToken }, .replaceAlwaysNew),
        // The client the provider refresh token was issued to: the sign-in's.
        IdentityColumn(
            "provider_token_client_id",
            derived: { p in "CASE WHEN \(p).provider_refresh_token_sealed IS NULL THEN NULL ELSE \(p).client_id END" },
            .follows("provider_refresh_token_sealed")),
        IdentityColumn(.text("attributes", sql: "r.attributes::jsonb") { IdentityAttributes.encode($0.request.attributes) }, .merge),
    ]

    /// The account columns a sign-in writes from its identity (the row the values are read from).
    static let account: [Written] = [
        Written(name: "email", value: { "\($0).email" }, rule: .replaceWhenBrought),
        Written(name: "email_verified", value: { "\($0).email_verified" }, rule: .follows("email")),
        Written(name: "is_private_email", value: { "\($0).is_private_email" }, rule: .follows("email")),
        Written(name: "given_name", value: { "\($0).given_name" }, rule: .fillWhenEmpty),
        Written(name: "family_name", value: { "\($0).family_name" }, rule: .fillWhenEmpty),
        Written(
            name: "display_name", value: { "nullif(trim(concat_ws(' ', \($0).given_name, \($0).family_name)), '')" },
            rule: .fillWhenEmpty),
    ]

    /// The session a sign-in opens, with its first refresh token: each column and the member
    /// of the element it is written from; `account_id` and `identity_id` are the statement's.
    static let session: [(name: String, member: String)] = [
        ("id", "session_id"), ("tenant_id", "tenant_id"), ("client_id", "client_id"), ("platform", "platform"),
        ("idp", "provider"), ("expires_at", "expires_at"), ("refresh_token_hash", "refresh_token_hash"),
        ("refresh_token_expires_at", "refresh_token_expires_at"), ("oauth_client_id", "oauth_client_id"),
        ("oauth_scope", "oauth_scope"),
    ]

    /// Every member of a posted element, in the order the record type lists them.
    static let posted: [Posted] =
        [
            .int("n", type: "int") { $0.n },
            // The identity's key.
            .uuid("tenant_id") { $0.request.tenantID },
            .text("provider") { $0.request.provider },
            .text("provider_scope") { $0.request.providerScope },
            .text("subject") { $0.request.subject },
        ]
        + identity.compactMap(\.posted)
        + [
            // The session to open.
            .uuid("session_id") { $0.request.session.id },
            .text("client_id") { $0.request.clientID },
            .text("platform") { $0.request.platform },
            .time("expires_at") { $0.request.session.expiresAt },
            .bytes("refresh_token_hash") { $0.request.session.refreshTokenHash },
            .time("refresh_token_expires_at") { $0.request.session.refreshTokenExpiresAt },
            // The relying party the session is for (decision 0082).
            .text("oauth_client_id") { $0.request.session.oauthClientID },
            .text("oauth_scope") { $0.request.session.oauthScope },
            // Open sessions the account may keep with this one (decision 0051).
            .int("max_open_sessions", type: "int") { $0.request.maxOpenSessions },
            // Whether the sign-in may create an account (its intent is not `sign_in`), and
            // whether a new identity may join an account by its verified email.
            .bool("may_create") { $0.request.intent != .signIn },
            .bool("auto_link") { $0.request.autoLinkByEmail },
            // The ids a new identity and a new account take.
            .uuid("new_identity_id") { $0.newIDs?.identity },
            .uuid("new_account_id") { $0.newIDs?.account },
            // A relying party's authorization code kept with the session (decision 0100).
            .bytes("code_state_hash") { $0.request.keptCode?.stateHash },
            .bytes("code_hash") { $0.request.keptCode?.codeHash },
            .bytes("code_grant_sealed") { $0.request.keptCode?.grantSealed },
            .time("code_expires_at") { $0.request.keptCode?.expiresAt },
            .time("code_now") { $0.request.keptCode?.now },
        ]

    private static func nonEmpty(_ value: String?) -> String? { value.flatMap { $0.isEmpty ? nil : $0 } }
}
