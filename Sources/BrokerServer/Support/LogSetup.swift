import BrokerApplication
import Logging

public enum LogSetup {
    /// A logger honouring BROKER_LOG_LEVEL and BROKER_LOG_FORMAT.
    public static func logger(label: String, configuration: BrokerConfiguration, defaultLevel: Logger.Level = .info)
        -> Logger
    {
        let json = configuration.logFormat.lowercased() != "text"
        var logger = Logger(label: label) { label in
            json ? JSONLogHandler(label: label) as any LogHandler : StreamLogHandler.standardError(label: label)
        }
        logger.logLevel = configuration.logLevel.flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? defaultLevel
        return logger
    }
}
