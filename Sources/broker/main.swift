import BrokerCommands

// The `broker` executable: the command line with the built-in provider types.
await BrokerCommandLine.main()
