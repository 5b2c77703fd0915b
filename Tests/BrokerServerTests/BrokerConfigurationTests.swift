import BrokerCore
import BrokerApplication
import BrokerServer
import Testing

@Suite struct BrokerConfigurationTests {
    @Test func signInBatchesDefaultToTwoAndTakeZeroToSixtyFour() throws {
        #expect(try BrokerConfiguration(environment: [:]).databaseSignInBatches == 2)
        #expect(try BrokerConfiguration(environment: ["BROKER_DB_SIGN_IN_BATCHES": "0"]).databaseSignInBatches == 0)
        #expect(try BrokerConfiguration(environment: ["BROKER_DB_SIGN_IN_BATCHES": "64"]).databaseSignInBatches == 64)
        for bad in ["65", "-1", "two"] {
            #expect(throws: BrokerError.self) { try BrokerConfiguration(environment: ["BROKER_DB_SIGN_IN_BATCHES": bad]) }
        }
    }
}
