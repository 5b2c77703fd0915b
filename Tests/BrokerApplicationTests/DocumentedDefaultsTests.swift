import BrokerApplication
import Foundation
import Testing

/// The default each setting's row states (docs/configuration.md, `serve --help`) is the value the
/// broker takes when the variable is unset: for every row whose default is a literal, setting the
/// variable to that literal gives the same configuration as leaving it unset. The list and
/// `BrokerConfiguration.init` state each default once each; this keeps the two from drifting.
@Suite struct DocumentedDefaultsTests {
    /// The rows whose default is one literal (`` `5` ``, or `` `10`, or twice ... `` for a burst),
    /// with that literal; not a default that depends on the command (`info` for `serve`, ...).
    static let literalDefaults: [(name: String, literal: String)] = BrokerConfiguration.settings.compactMap { setting in
        let text = setting.defaultValue
        guard text.hasPrefix("`"), let end = text.dropFirst().firstIndex(of: "`") else { return nil }
        let literal = String(text[text.index(after: text.startIndex)..<end])
        let rest = text[text.index(after: end)...]
        // A placeholder (`http://HOST:PORT`) is prose, not a value.
        guard rest.isEmpty || rest.hasPrefix(", or twice"), !literal.contains("HOST"), !setting.isFamily else { return nil }
        return (setting.name, literal)
    }

    /// Rates whose burst defaults to twice them when only the rate is set: giving the rate alone,
    /// even at its default, moves the burst (as their rows say), so they are checked with it.
    static let rates: Set<String> = Set(
        BrokerConfiguration.settings.compactMap { setting in
            setting.defaultValue.firstRange(of: "or twice `").map { range in
                String(setting.defaultValue[range.upperBound...].prefix { $0 != "`" })
            }
        })

    static func described(_ environment: [String: String]) throws -> String {
        var text = ""
        dump(try BrokerConfiguration(environment: environment), to: &text)
        return text
    }

    @Test func everyLiteralDefaultIsWhatAnUnsetVariableGives() throws {
        #expect(Self.literalDefaults.count >= 25, "the rows with a literal default: \(Self.literalDefaults.map(\.name))")
        let unset = try Self.described([:])
        for (name, literal) in Self.literalDefaults where !Self.rates.contains(name) {
            let given = try Self.described([name: literal])
            #expect(given == unset, "\(name): its row says the default is \(literal), the code does otherwise")
        }
        // All at once, the rates with their bursts.
        let all = Dictionary(Self.literalDefaults.map { ($0.name, $0.literal) }, uniquingKeysWith: { first, _ in first })
        #expect(!Self.rates.isEmpty && Self.rates.allSatisfy { all[$0] != nil }, "\(Self.rates)")
        #expect(try Self.described(all) == unset, "every literal default at once")
    }

    /// The check itself tells a wrong default: a value other than the stated one changes the
    /// configuration (so an equal description above is not an accident of what dump shows).
    @Test func aValueOtherThanTheDefaultChangesTheConfiguration() throws {
        let unset = try Self.described([:])
        #expect(try Self.described(["BROKER_PORT": "8081"]) != unset)
        #expect(try Self.described(["BROKER_DB_TENANT_SCOPE": "transaction"]) != unset)
        #expect(try Self.described(["BROKER_LOG_FORMAT": "text"]) != unset)
    }
}
