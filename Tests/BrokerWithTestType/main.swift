import BrokerCommands
import Foundation
import TestOnlyProviderType

// The real `broker` command line with one more provider type registered: the test-only type,
// whose key set is the JWKS document in BROKER_TEST_ONLY_JWKS (the test that runs this holds the
// signing key). Tests only (ProviderTypeCLITests); nothing in Sources knows of it.
let jwks = ProcessInfo.processInfo.environment[TestOnlyProvider.jwksVariable].map { Data($0.utf8) } ?? Data(#"{"keys":[]}"#.utf8)
await BrokerCommandLine.main(additionalProviderTypes: [TestOnlyProvider.descriptor(jwks: jwks)])
