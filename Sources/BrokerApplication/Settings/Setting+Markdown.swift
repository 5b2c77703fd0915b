import Foundation

extension Setting {
    /// The settings as docs/configuration.md shows them between its generated-block markers: per
    /// section, in ``Section`` order, a `## Title` heading, the introduction if any, a table
    /// `| variable | default | meaning |` of the section's settings in their order, and the
    /// afterword if any. Sections without settings are left out. Ends with a newline.
    public static func markdownTables(_ settings: [Setting]) -> String {
        bySection(settings).map { section, rows in
            var parts = ["## \(section.title)"]
            if let introduction = section.introduction { parts.append(introduction) }
            parts.append(
                (["| variable | default | meaning |", "|---|---|---|"] + rows.map(\.markdownRow)).joined(separator: "\n"))
            if let afterword = section.afterword { parts.append(afterword) }
            return parts.joined(separator: "\n\n")
        }.joined(separator: "\n\n") + "\n"
    }

    /// The variable column: the name in backticks, a family as "other `OTEL_*`".
    public var markdownName: String { isFamily ? "other `\(name)`" : "`\(name)`" }

    /// One table row; a `|` inside a cell is escaped so that it does not end the cell.
    var markdownRow: String {
        "| " + [markdownName, defaultValue, meaning].map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |"
    }
}
