import Foundation

extension Setting {
    /// The settings as `broker serve --help` lists them: per section, every name whole on a line
    /// of its own, its meaning and default as plain text indented below it, wrapped to fit 79
    /// columns (ArgumentParser leaves lines that fit an 80-column terminal as they are).
    public static func helpText(_ settings: [Setting]) -> String {
        bySection(settings).map { section, rows in
            ([section.title + ":"] + rows.map(\.helpEntry)).joined(separator: "\n")
        }.joined(separator: "\n\n")
    }

    /// The name as help prints it: a family as "other OTEL_*".
    public var plainName: String { isFamily ? "other \(name)" : name }

    var helpEntry: String {
        let lines =
            ["  " + plainName] + Self.wrapped(Self.plainText(meaning), indent: 6)
            + Self.wrapped("Default: " + Self.plainText(defaultValue) + ".", indent: 6)
        return lines.joined(separator: "\n")
    }

    /// Markdown made plain: a link to another document becomes its text in single quotes ("the
    /// operator guide's 'The master key'"), a link within the document its bare text; backticks
    /// and `**` go.
    public static func plainText(_ markdown: String) -> String {
        var text = ""
        var rest = markdown[...]
        while let open = rest.firstIndex(of: "[") {
            text += rest[..<open]
            let inside = rest[rest.index(after: open)...]
            if let middle = inside.range(of: "]("), !inside[..<middle.lowerBound].contains("["),
                let close = inside[middle.upperBound...].firstIndex(of: ")")
            {
                let title = inside[..<middle.lowerBound]
                text += inside[middle.upperBound...].hasPrefix("#") ? "\(title)" : "'\(title)'"
                rest = inside[inside.index(after: close)...]
            } else {
                text += "["
                rest = inside
            }
        }
        text += rest
        return text.replacingOccurrences(of: "**", with: "").replacingOccurrences(of: "`", with: "")
    }

    /// `text`'s words in lines of at most `width` characters, each indented by `indent`. A word
    /// too long for a line is broken after a `|` (a list of alternatives in a URL) if it has one,
    /// and gets less indentation if it must, so that no line is longer than `width` unless a piece
    /// of a word alone is.
    static func wrapped(_ text: String, indent: Int, width: Int = 79) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(whereSeparator: \.isWhitespace).flatMap({ pieces($0, width: width - indent) }) {
            if line.isEmpty {
                line = String(word)
            } else if indent + line.count + 1 + word.count <= width {
                line += " " + word
            } else {
                lines.append(line)
                line = String(word)
            }
        }
        if !line.isEmpty { lines.append(line) }
        return lines.map { String(repeating: " ", count: max(0, min(indent, width - $0.count))) + $0 }
    }

    /// `word` broken after `|`s into pieces of at most `width` characters where it can be.
    static func pieces(_ word: Substring, width: Int) -> [Substring] {
        var pieces: [Substring] = []
        var rest = word
        while rest.count > width,
            let cut = rest.prefix(width).lastIndex(of: "|") ?? rest.firstIndex(of: "|"),
            rest.index(after: cut) < rest.endIndex
        {
            pieces.append(rest[...cut])
            rest = rest[rest.index(after: cut)...]
        }
        return pieces + [rest]
    }
}
