import BrokerCore
import Testing

@Suite struct TenantSlugTests {
    @Test(arguments: ["abc", "acme-prod", "a1-b2-c3", "123", String(repeating: "a", count: 40)])
    func acceptsValidSlugs(_ value: String) throws {
        #expect(try TenantSlug(value).rawValue == value)
    }

    @Test(arguments: [
        "ab", String(repeating: "a", count: 41), "Acme", "acme_prod", "acme prod", "-acme", "acme-", "acmé", "", "a/b",
    ])
    func refusesInvalidSlugs(_ value: String) {
        #expect(throws: BrokerError.self) { try TenantSlug(value) }
    }

    @Test func errorExplainsTheRule() {
        do {
            _ = try TenantSlug("Bad_Slug")
            Issue.record("expected an error")
        } catch {
            #expect(error.code == "invalid_slug")
            #expect(error.detail.contains("lowercase"))
            #expect(error.detail.contains("3-40"))
            #expect(error.hint == nil)
        }
    }
}
