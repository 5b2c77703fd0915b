// Binding a `Date` stops the process when the instant, in microseconds since 2000-01-01, does not
// fit in an Int64 (about ±292,000 years): `Date.encode` is non-throwing
// (`PostgresNonThrowingEncodable`) and converts with `Int64(seconds)`, which traps. A Date
// decoded from outside (a token's `iat`, a notification's `event_time` sent in nanoseconds where
// milliseconds were expected) reaches a bind in one step. PostgreSQL itself refuses timestamps
// outside 4713 BC to 294276 AD; an encoder that throws (or clamps to ±infinity) would let the
// statement fail instead of the process. No database is needed.
//
// swift run repro-date-trap
// Runs the bind in a child process of itself. Exit 0: still present (the child trapped).
// Exit 1: fixed upstream (the bind returned or threw). 2: inconclusive.
import Foundation
import PostgresNIO

if CommandLine.arguments.dropFirst().first == "--child" {
    // 1.8e18 ms (nanoseconds read as milliseconds) as seconds: 1.8e15 s, about 57 million years.
    let far = Date(timeIntervalSince1970: 1.8e15)
    var bindings = PostgresBindings()
    bindings.append(far)
    print("child: bound \(far) (\(bindings.count) binding)")
    exit(3)
}

let child = Process()
child.executableURL = Bundle.main.executableURL
child.arguments = ["--child"]
child.environment = ProcessInfo.processInfo.environment.merging(["SWIFT_BACKTRACE": "enable=no"]) { $1 }
let errors = Pipe()
child.standardError = errors
try child.run()
child.waitUntilExit()
let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
let fatal = stderr.split(separator: "\n").first { $0.contains("Fatal error") } ?? ""
if child.terminationReason == .uncaughtSignal {
    print("child stopped by signal \(child.terminationStatus): \(fatal)")
    print("still present: binding Date(timeIntervalSince1970: 1.8e15) stopped the process")
    exit(0)
}
if child.terminationReason == .exit && child.terminationStatus == 3 {
    print("fixed upstream: binding a Date out of Int64 microseconds range did not stop the process")
    exit(1)
}
print("inconclusive: child exited with status \(child.terminationStatus)\n\(stderr)")
exit(2)
