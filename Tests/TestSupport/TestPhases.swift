import Testing

/// The phases of the test command (scripts/test.sh), by Swift Testing tag. A suite with none of
/// these runs in the first phase, beside every other untagged suite (at most 12 tests at once);
/// a tagged suite runs after it, in its tag's phase, in this order. scripts/test-phases.py reads
/// the tags from the test bundle's own list, so a new suite joins a phase by its tag alone.
extension Tag {
    /// It holds a timing bound that the two cores' load of 400 other tests would break, not the
    /// code: a task waiting on a deadline is resumed seconds late under that load. (A provider
    /// answer trickling in is cut off within its timeout plus a second; a served broker with a
    /// 3 s provider timeout gets MockIdP's answers in time.)
    @Tag public static var timing: Self
    /// It makes load of its own (2,000 connections; three broker processes and 200 sign-ins at
    /// once): beside other tests, a 1 s provider timeout was once answered in 2.06 s against
    /// its 2 s bound. The phase runs its tests one at a time, so no two of them load each other.
    @Tag public static var load: Self
    /// It stops and starts PostgreSQL (its own cluster) and bounds how soon the broker notices
    /// and recovers: readiness turns 503 within 2.5 s of a stop, the first sign-in succeeds
    /// within 5 s of the return.
    @Tag public static var outage: Self
    /// Contract fuzzing: it loads both cores for about a minute; alone, last.
    @Tag public static var fuzz: Self
}
