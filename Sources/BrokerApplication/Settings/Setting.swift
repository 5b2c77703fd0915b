/// One environment variable the broker reads, as docs/configuration.md tables it and
/// `broker serve --help` lists it. Every one is in ``BrokerConfiguration/settings``; the tables
/// of docs/configuration.md are generated from that list (``markdownTables(_:)``).
public struct Setting: Sendable, Hashable {
    /// The variable's name, exactly as the broker reads it; a name ending in `*` stands for a
    /// family of variables (the other `OTEL_*`) that the broker leaves to a library.
    public let name: String
    public let section: Section
    /// The default as shown to a reader (Markdown), e.g. "`5`" or "three times the CPU cores,
    /// at least 4".
    public let defaultValue: String
    /// What the variable does, its range and what it refuses (Markdown: code in backticks,
    /// links into the other documents of docs/, relative to it).
    public let meaning: String

    public init(_ name: String, _ section: Section, default defaultValue: String, _ meaning: String) {
        self.name = name
        self.section = section
        self.defaultValue = defaultValue
        self.meaning = meaning
    }

    /// True for a row that stands for a family of variables (`OTEL_*`), not one name.
    public var isFamily: Bool { name.hasSuffix("*") }
}
