import BrokerCore
import Foundation
import Providers

/// The words `broker provider enable` hands to the provider types: the provider id and the
/// settings of its type, each `--name VALUE`, `--name=VALUE` or a bare switch, in any order.
///
/// ArgumentParser (1.x) declares a command's options when it is compiled; a type's settings are
/// its descriptor's (``ProviderDescriptor/settingFlags``), known only when the process runs
/// (decision 0079). So the command declares what every type shares and leaves the rest to
/// ArgumentParser's `.allUnrecognized` capture, and this reads those words against the flags
/// the installed types declare, and nothing else: whether a value is expected comes from the
/// flag, a secret's value is the file it names, and the type's descriptor then refuses what is
/// not its own.
struct ProviderSettingArguments: Equatable {
    var provider: String
    /// Each flag's values by its name (`client-id`); a switch given is `["true"]`; a secret's
    /// value is the path of its file until ``readingSecretFiles(_:)``.
    var values: [String: [String]]

    /// Reads `words` against `flags` (every installed type's); refuses a word no type takes.
    static func read(_ words: [String], flags: [ProviderSettingFlag]) throws -> ProviderSettingArguments {
        let byCommandLine = Dictionary(flags.map { ($0.commandLine, $0) }, uniquingKeysWith: { first, _ in first })
        var provider: String?
        var values: [String: [String]] = [:]
        var index = words.startIndex
        while index < words.endIndex {
            let word = words[index]
            index += 1
            guard word.hasPrefix("--") else {
                guard provider == nil else {
                    throw BrokerError.invalidArgument(
                        "'\(word.prefix(80))' is one word too many: give one provider id, and each setting as --name VALUE.",
                        hint: "Quote a value that has spaces; the settings of each type: broker provider enable --help")
                }
                provider = word
                continue
            }
            let parts = word.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            guard let flag = byCommandLine[name] else {
                throw BrokerError.invalidArgument(
                    "\(name.prefix(60)) is not a setting of any provider type this broker knows.",
                    hint: "The settings of each type: broker provider enable --help")
            }
            let value: String
            if flag.valueName == nil {
                guard parts.count == 1 else {
                    throw BrokerError.invalidArgument("\(name) is a switch; it takes no value.", hint: "Give \(name) alone.")
                }
                value = "true"
            } else if parts.count == 2 {
                value = String(parts[1])
            } else {
                guard index < words.endIndex, byCommandLine[words[index]] == nil, !words[index].hasPrefix("--") else {
                    throw BrokerError.invalidArgument("\(name) needs a value.", hint: "Give it as \(flag.usage).")
                }
                value = words[index]
                index += 1
            }
            values[flag.name, default: []].append(value)
        }
        guard let provider else {
            throw BrokerError.invalidArgument(
                "Give the provider id.", hint: "For example: broker provider enable google --tenant <slug> --client-id ID")
        }
        return ProviderSettingArguments(provider: provider, values: values)
    }

    /// The values with each secret's file read in its place (trimmed), never echoed.
    func readingSecretFiles(_ flags: [ProviderSettingFlag]) throws -> [String: [String]] {
        var values = values
        // Once per name: types share flags (Google's and OIDC's web flow both have client-secret).
        for name in Set(flags.filter(\.isSecret).map(\.name)) {
            guard let paths = self.values[name] else { continue }
            values[name] = try paths.map { path in
                guard let raw = try? String(contentsOfFile: path, encoding: .utf8) else {
                    throw BrokerError.invalidArgument(
                        "Cannot read the \(name.replacingOccurrences(of: "-", with: " ")) file '\(path)'.",
                        hint: "Check the path and that the file is readable.")
                }
                return raw.trimmingCharacters(in: .whitespacesAndNewlines)
            }
        }
        return values
    }

    /// Every installed type's settings, for `broker provider enable --help`: one block per type
    /// that `enable` configures, each flag on a line of its own and what it is on the next (the
    /// help is wrapped at 80 columns).
    static func help(_ descriptors: [ProviderDescriptor]) -> String {
        descriptors.filter { $0.configure != nil }.map { descriptor in
            let reserved = ProviderID.reserved.contains { $0.reservedType == descriptor.type }
            let id = reserved ? descriptor.type.rawValue : "<id> --type \(descriptor.type.rawValue)"
            let lines = descriptor.settingFlags.map { flag in
                let notes = [flag.required ? "required" : nil, flag.repeatable ? "repeatable" : nil].compactMap { $0 }
                return "  \(flag.usage)\(notes.isEmpty ? "" : " (\(notes.joined(separator: ", ")))")\n      \(flag.help)"
            }
            return (["\(id) (\(descriptor.displayName)):"] + lines).joined(separator: "\n")
        }.joined(separator: "\n")
    }
}
