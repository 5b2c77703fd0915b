import BrokerApplication
import BrokerCore
import Foundation
import Mustache
import Providers

/// The hosted sign-in page and the authorization endpoint's error pages (issue 42 §2, decision
/// 0082), rendered with swift-mustache, which escapes every `{{value}}` for HTML: the tenant's
/// name and the providers' display names are the operator's text. No script, nothing from
/// another origin: one stylesheet of the broker's own (``stylesheet``), the Apple logo inline.
/// English and Japanese.
struct SignInPageRenderer: Sendable {
    enum Language: String, Sendable {
        case en
        case ja

        /// `ui_locales` (OpenID Connect Core §3.1.2.1) first, then `Accept-Language`: the first
        /// of English and Japanese the person prefers; English otherwise.
        static func chosen(uiLocales: String?, acceptLanguage: String?) -> Language {
            for tag in (uiLocales ?? "").split(separator: " ") {
                if let language = Language(tag: tag) { return language }
            }
            var best: (language: Language, quality: Double)?
            for item in (acceptLanguage ?? "").split(separator: ",") {
                let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
                guard let tag = parts.first, let language = Language(tag: Substring(tag)) else { continue }
                let quality =
                    parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
                guard quality > 0, quality > (best?.quality ?? 0) else { continue }
                best = (language, quality)
            }
            return best?.language ?? .en
        }

        init?(tag: Substring) {
            let primary = tag.split(separator: "-").first?.lowercased()
            guard let primary, let language = Language(rawValue: primary) else { return nil }
            self = language
        }
    }

    /// Where the page's stylesheet is served (the broker's own origin).
    static let stylesheetPath = "/assets/sign-in.css"

    /// The templates, parsed once per process.
    static let shared = SignInPageRenderer()

    private let page: MustacheTemplate?
    private let errorPage: MustacheTemplate?

    init() {
        page = try? MustacheTemplate(string: Self.pageTemplate)
        errorPage = try? MustacheTemplate(string: Self.errorTemplate)
    }

    /// The sign-in page; nil only if the template failed to parse (a test renders both).
    func render(_ model: AuthorizationService.SignInPage, language: Language) -> String? {
        let options: [[String: Any]] = model.options.map { option in
            [
                "href": option.href, "label": Self.label(option, language), "apple": option.type == .apple,
                "provider": option.provider.rawValue,
            ]
        }
        let context: [String: Any] = [
            "lang": language.rawValue, "tenant": model.tenantName, "title": language == .ja ? "サインイン" : "Sign in",
            "lead": language == .ja ? "続けるには、次のいずれかでサインインしてください。" : "Choose how to sign in to continue.",
            "none": language == .ja ? "利用できるサインイン方法がありません。" : "No way to sign in is available.",
            "options": options, "hasOptions": !options.isEmpty, "stylesheet": Self.stylesheetPath,
        ]
        return page?.render(context)
    }

    /// An error page of the authorization endpoint: shown instead of a redirect.
    func render(_ message: AuthorizationService.ErrorPageMessage, language: Language) -> String {
        let text = Self.words(message, language)
        let context: [String: Any] = [
            "lang": language.rawValue, "title": language == .ja ? "サインインできません" : "Sign-in cannot continue", "message": text,
            "code": message.rawValue, "stylesheet": Self.stylesheetPath,
        ]
        return errorPage?.render(context)
            ?? "<!doctype html><html><head><meta charset=\"utf-8\"><title>Sign-in</title></head><body><p>\(message.rawValue)</p></body></html>\n"
    }

    /// The end-session endpoint's page: signed out, or why the request was not honoured.
    func render(_ logout: LogoutService.Outcome, language: Language) -> String {
        let (title, message, code): (String, String, String)
        switch (logout, language) {
        case (.refused(let refusal), .en):
            (title, message, code) = ("Sign-out cannot continue", "The app's sign-out request is not valid here.", refusal.rawValue)
        case (.refused(let refusal), .ja):
            (title, message, code) = ("サインアウトできません", "アプリからのサインアウトの要求が正しくありません。", refusal.rawValue)
        case (.unavailable, _):
            (title, message, code) = (
                language == .ja ? "サインアウトできません" : "Sign-out cannot continue", Self.words(.unavailable, language),
                "temporarily_unavailable"
            )
        case (_, .en): (title, message, code) = ("Signed out", "You are signed out. You can close this page.", "signed_out")
        case (_, .ja): (title, message, code) = ("サインアウトしました", "サインアウトしました。このページを閉じてかまいません。", "signed_out")
        }
        let context: [String: Any] = [
            "lang": language.rawValue, "title": title, "message": message, "code": code, "stylesheet": Self.stylesheetPath,
        ]
        return errorPage?.render(context)
            ?? "<!doctype html><html><head><meta charset=\"utf-8\"><title>Sign-out</title></head><body><p>\(code)</p></body></html>\n"
    }

    /// A provider's standard label: Apple's own wording for Sign in with Apple (Human Interface
    /// Guidelines), Facebook's "Continue with", LINE's and the others' "Sign in with".
    static func label(_ option: AuthorizationService.SignInPage.Option, _ language: Language) -> String {
        switch (option.type, language) {
        case (.apple, .en): "Sign in with Apple"
        case (.apple, .ja): "Appleでサインイン"
        case (.facebook, .en): "Continue with Facebook"
        case (.facebook, .ja): "Facebookでログイン"
        case (_, .en): "Sign in with \(option.displayName)"
        case (_, .ja): "\(option.displayName)でログイン"
        }
    }

    static func words(_ message: AuthorizationService.ErrorPageMessage, _ language: Language) -> String {
        switch (message, language) {
        case (.unknownTenant, .en): "This sign-in address names no tenant of the broker."
        case (.unknownTenant, .ja): "このサインインのアドレスは、どのテナントのものでもありません。"
        case (.unknownClient, .en): "The app that sent you here is not registered (unknown client_id)."
        case (.unknownClient, .ja): "このアプリは登録されていません（client_id が不明です）。"
        case (.redirectURIMissing, .en): "The app did not say where to send you back (redirect_uri is missing)."
        case (.redirectURIMissing, .ja): "戻り先が指定されていません（redirect_uri がありません）。"
        case (.redirectURINotRegistered, .en): "The app asked to send you back to an address it has not registered (redirect_uri)."
        case (.redirectURINotRegistered, .ja): "戻り先のアドレスが登録されていません（redirect_uri）。"
        case (.repeatedParameter, .en): "The sign-in request repeats client_id or redirect_uri."
        case (.repeatedParameter, .ja): "サインインの要求に client_id か redirect_uri が重複しています。"
        case (.unavailable, .en): "Sign-in is unavailable for a moment. Go back to the app and try again."
        case (.unavailable, .ja): "サインインは一時的に利用できません。アプリに戻って、もう一度お試しください。"
        case (.rateLimited, .en): "Too many sign-in requests came from your network. Wait a moment and try again."
        case (.rateLimited, .ja): "お使いのネットワークからの要求が多すぎます。しばらく待ってから、もう一度お試しください。"
        }
    }

    static let pageTemplate = """
        <!doctype html>
        <html lang="{{lang}}">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>{{title}} · {{tenant}}</title>
        <link rel="stylesheet" href="{{stylesheet}}">
        </head>
        <body>
        <main>
        <h1>{{tenant}}</h1>
        {{#hasOptions}}
        <p>{{lead}}</p>
        <ul>
        {{#options}}
        <li><a class="option{{#apple}} apple{{/apple}}" href="{{href}}" data-provider="{{provider}}">{{#apple}}<svg viewBox="0 0 17 20" width="17" height="20" aria-hidden="true" focusable="false"><path fill="#fff" d="M14.1 10.6c0-2.6 2.1-3.8 2.2-3.9-1.2-1.8-3.1-2-3.7-2-1.6-.2-3.1.9-3.9.9-.8 0-2-.9-3.4-.9-1.7 0-3.3 1-4.2 2.6-1.8 3.1-.5 7.7 1.3 10.2.9 1.2 1.9 2.6 3.2 2.6 1.3-.1 1.8-.8 3.3-.8 1.6 0 2 .8 3.4.8 1.4 0 2.3-1.3 3.1-2.5 1-1.4 1.4-2.8 1.4-2.9-.1 0-2.7-1-2.7-4.1zM11.6 3c.7-.9 1.2-2 1-3.2-1 0-2.3.7-3 1.6-.7.8-1.2 2-1.1 3.1 1.2.1 2.3-.6 3.1-1.5z"/></svg>{{/apple}}<span>{{label}}</span></a></li>
        {{/options}}
        </ul>
        {{/hasOptions}}
        {{^hasOptions}}
        <p>{{none}}</p>
        {{/hasOptions}}
        </main>
        </body>
        </html>

        """

    static let errorTemplate = """
        <!doctype html>
        <html lang="{{lang}}">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}}</title>
        <link rel="stylesheet" href="{{stylesheet}}">
        </head>
        <body>
        <main>
        <h1>{{title}}</h1>
        <p>{{message}}</p>
        <p class="code">{{code}}</p>
        </main>
        </body>
        </html>

        """

    /// The page's stylesheet: the Sign in with Apple button black with white text and logo, at
    /// least 140 × 30 CSS pixels (Apple's Human Interface Guidelines); the others outlined.
    static let stylesheet = """
        body{margin:0;font-family:-apple-system,BlinkMacSystemFont,"Helvetica Neue","Hiragino Sans",Meiryo,sans-serif;background:#f5f5f7;color:#1d1d1f}
        main{max-width:22rem;margin:4rem auto;padding:2rem;background:#fff;border-radius:12px}
        h1{font-size:1.4rem;margin:0 0 .5rem}
        ul{list-style:none;margin:1.5rem 0 0;padding:0}
        li{margin:0 0 .75rem}
        .option{display:flex;align-items:center;justify-content:center;gap:.5rem;box-sizing:border-box;min-width:140px;min-height:44px;width:100%;padding:0 1rem;border:1px solid #1d1d1f;border-radius:8px;color:#1d1d1f;background:#fff;font-size:1rem;font-weight:500;text-decoration:none}
        .option.apple{background:#000;border-color:#000;color:#fff}
        .option svg{flex:none}
        .option:focus-visible{outline:3px solid #0071e3;outline-offset:2px}
        .code{color:#6e6e73;font-size:.8rem}

        """
}
