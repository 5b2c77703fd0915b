import Foundation

/// Comparisons of secrets and of values derived from them whose time does not depend on where
/// they first differ (only on their lengths).
public enum ConstantTime {
    public static func equals(_ a: String, _ b: String) -> Bool { equals(Array(a.utf8), Array(b.utf8)) }

    public static func equals(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
