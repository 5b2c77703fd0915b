import Foundation

/// Splits a migration file into statements. PostgreSQL's extended protocol takes one statement
/// per query, so the migrator runs them one by one inside one transaction. Semicolons inside
/// quotes, quoted identifiers, dollar-quoted bodies and comments do not split.
public enum SQLScript {
    public static func statements(_ script: String) -> [String] {
        var statements: [String] = []
        var current = ""
        let chars = Array(script)
        var index = 0

        func flush() {
            let trimmed = current.trimmingCharacters(in: .whitespacesAndNewlines)
            if !trimmed.isEmpty, !isOnlyComments(trimmed) { statements.append(trimmed) }
            current = ""
        }

        while index < chars.count {
            let char = chars[index]
            let next: Character? = index + 1 < chars.count ? chars[index + 1] : nil
            switch char {
            case "-" where next == "-":
                while index < chars.count, chars[index] != "\n" {
                    current.append(chars[index])
                    index += 1
                }
                continue
            case "/" where next == "*":
                var depth = 0
                repeat {
                    if chars[index] == "/", index + 1 < chars.count, chars[index + 1] == "*" {
                        depth += 1
                        current += "/*"
                        index += 2
                    } else if chars[index] == "*", index + 1 < chars.count, chars[index + 1] == "/" {
                        depth -= 1
                        current += "*/"
                        index += 2
                    } else {
                        current.append(chars[index])
                        index += 1
                    }
                } while depth > 0 && index < chars.count
                continue
            case "'", "\"":
                current.append(char)
                index += 1
                while index < chars.count {
                    current.append(chars[index])
                    if chars[index] == char {
                        // A doubled quote is an escaped quote, not the end.
                        if index + 1 < chars.count, chars[index + 1] == char {
                            current.append(chars[index + 1])
                            index += 2
                            continue
                        }
                        index += 1
                        break
                    }
                    index += 1
                }
                continue
            case "$":
                if let tag = dollarTag(chars, at: index) {
                    current += tag
                    index += tag.count
                    while index < chars.count {
                        if chars[index] == "$", String(chars[index..<min(chars.count, index + tag.count)]) == tag {
                            current += tag
                            index += tag.count
                            break
                        }
                        current.append(chars[index])
                        index += 1
                    }
                    continue
                }
            case ";":
                flush()
                index += 1
                continue
            default:
                break
            }
            current.append(char)
            index += 1
        }
        flush()
        return statements
    }

    /// `$$` or `$tag$` starting at `index`, if one does.
    private static func dollarTag(_ chars: [Character], at index: Int) -> String? {
        var end = index + 1
        while end < chars.count, chars[end].isLetter || chars[end].isNumber || chars[end] == "_" {
            end += 1
        }
        guard end < chars.count, chars[end] == "$" else { return nil }
        if end > index + 1, chars[index + 1].isNumber { return nil }  // $1 is a parameter
        return String(chars[index...end])
    }

    private static func isOnlyComments(_ text: String) -> Bool {
        text.split(separator: "\n").allSatisfy {
            let line = $0.trimmingCharacters(in: .whitespaces)
            return line.isEmpty || line.hasPrefix("--")
        }
    }
}
