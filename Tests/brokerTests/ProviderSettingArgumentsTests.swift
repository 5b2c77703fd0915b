import BrokerCore
import Foundation
import Providers
import Testing

@testable import BrokerCommands

/// How `broker provider enable` reads the words it leaves to the provider types (decision
/// 0079), against every built-in type's flags: any order, `--name=value` or `--name value`,
/// switches, secrets as files, and each wrong shape refused by name.
@Suite struct ProviderSettingArgumentsTests {
    static let flags = ProviderRegistry.builtInDescriptors.flatMap(\.settingFlags)

    static func read(_ words: [String]) throws -> ProviderSettingArguments {
        try ProviderSettingArguments.read(words, flags: flags)
    }

    static func refusal(_ words: [String]) -> String? {
        do {
            _ = try read(words)
            return nil
        } catch let error as BrokerError {
            return error.detail
        } catch {
            return "\(error)"
        }
    }

    /// Every order of the provider id and three settings (one repeated, one a switch), each
    /// valued one written both ways: 24 orders × 4 spellings, all read alike.
    @Test func everyOrderAndSpellingReadsTheSame() throws {
        let expected = ProviderSettingArguments(
            provider: "line", values: ["issuer": ["https://a.example"], "client-id": ["c1", "c2"], "nonce-required": ["true"]])
        for equals in [(false, false), (false, true), (true, false), (true, true)] {
            let issuer = equals.0 ? ["--issuer=https://a.example"] : ["--issuer", "https://a.example"]
            let clients = equals.1 ? [["--client-id=c1"], ["--client-id=c2"]] : [["--client-id", "c1"], ["--client-id", "c2"]]
            let parts: [[String]] = [["line"], issuer, ["--nonce-required"], clients[0] + clients[1]]
            for order in permutations(Array(parts.indices)) {
                let words = order.flatMap { parts[$0] }
                #expect(try Self.read(words) == expected, "\(words)")
            }
        }
    }

    @Test func aValueMayHoldWhatAFlagDoes() throws {
        // `=` inside a value, a value starting with one dash, spaces: all kept whole.
        let read = try Self.read([
            "line", "--display-name", "-Yahoo! = JAPAN ID", "--scopes=openid email", "--jwks-url=https://k.example/?a=b",
        ])
        #expect(read.values["display-name"] == ["-Yahoo! = JAPAN ID"])
        #expect(read.values["scopes"] == ["openid email"])
        #expect(read.values["jwks-url"] == ["https://k.example/?a=b"])
    }

    @Test func eachWrongShapeIsRefusedByName() {
        #expect(Self.refusal(["line", "--colour", "red"])?.contains("--colour is not a setting of any provider type") == true)
        #expect(Self.refusal(["line", "--issuer"])?.contains("--issuer needs a value") == true)
        #expect(Self.refusal(["line", "--issuer", "--client-id", "c"])?.contains("--issuer needs a value") == true)
        #expect(Self.refusal(["line", "--nonce-required=yes"])?.contains("--nonce-required is a switch") == true)
        #expect(Self.refusal(["line", "extra"])?.contains("'extra' is one word too many") == true)
        #expect(Self.refusal(["--client-id", "c"])?.contains("Give the provider id") == true)
        // A secret is named by its file flag only: the bare name is no flag.
        #expect(Self.refusal(["facebook", "--app-secret", "s"])?.contains("--app-secret is not a setting") == true)
    }

    @Test func aSecretIsReadFromItsFileAndNeverFromTheWords() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)").path
        try "  the-secret\n".write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let read = try Self.read(["facebook", "--app-id", "1", "--app-secret-file", file, "--limited-login"])
        #expect(read.values["app-secret"] == [file])
        let values = try read.readingSecretFiles(Self.flags)
        #expect(values["app-secret"] == ["the-secret"])
        #expect(values["app-id"] == ["1"])
        #expect(values["limited-login"] == ["true"])
        // A secret flag two types share (the web flow's) is read once: its value is the file's.
        let web = try Self.read(["line", "--client-id", "c", "--client-secret-file", file])
        #expect(try web.readingSecretFiles(Self.flags)["client-secret"] == ["the-secret"])
        let missing = try Self.read(["google", "--client-id", "c", "--client-secret-file", file + "-gone"])
        #expect(throws: BrokerError.self) { try missing.readingSecretFiles(Self.flags) }
    }

    /// A flag name two types share means the same to both (whether it takes a value): the
    /// reader looks flags up by name across types.
    @Test func aSharedFlagNameTakesAValueInEveryTypeOrInNone() {
        let byName = Dictionary(grouping: Self.flags, by: \.name)
        for (name, flags) in byName {
            #expect(Set(flags.map { $0.valueName == nil }).count == 1, "\(name)")
        }
    }
}

private func permutations<T>(_ items: [T]) -> [[T]] {
    guard items.count > 1 else { return [items] }
    return items.indices.flatMap { index -> [[T]] in
        var rest = items
        let item = rest.remove(at: index)
        return permutations(rest).map { [item] + $0 }
    }
}
