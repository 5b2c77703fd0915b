extension Setting {
    /// The sections of docs/configuration.md, in its order; the raw value is the heading.
    public enum Section: String, CaseIterable, Sendable {
        case database = "The database"
        case embeddedDefault = "The embedded default"
        case listening = "Listening, URLs and requests"
        case abuseLimits = "Abuse limits"
        case sessions = "Sessions"
        case providers = "Providers"
        case appleLifecycle = "Apple's account lifecycle and webhooks"
        case observability = "Logs, metrics, traces and readiness"

        public var title: String { rawValue }

        /// A paragraph between the heading and the table (Markdown, lines as the document wraps them).
        public var introduction: String? {
            switch self {
            case .abuseLimits:
                """
                Each limit is kept by each instance for itself: N instances give a caller up to N times each
                limit. The operator guide's [Abuse limits](operator-guide.md#abuse-limits) explains them.
                """
            default: nil
            }
        }

        /// A paragraph after the table (Markdown, lines as the document wraps them).
        public var afterword: String? {
            switch self {
            case .sessions:
                """
                Token lifetimes (access tokens 15 minutes, refresh families 60 days, idle refresh tokens 30
                days), the key activation delay, auto-linking, a tenant's rate and its session cap are tenant
                settings stored in the database, not variables: see the operator guide's
                [Tenants](operator-guide.md#tenants).
                """
            default: nil
            }
        }
    }
}

extension Setting {
    /// `settings` grouped by section, in ``Section`` order, each section's in their own order;
    /// sections without settings left out. Both renderings (the document's tables, the help) go
    /// through it.
    static func bySection(_ settings: [Setting]) -> [(section: Section, rows: [Setting])] {
        Section.allCases.compactMap { section in
            let rows = settings.filter { $0.section == section }
            return rows.isEmpty ? nil : (section, rows)
        }
    }
}
