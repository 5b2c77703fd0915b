import Foundation

/// Runs blocking work (a child process waited on, a blocking socket read) on a thread of its
/// own and awaits it. On the cooperative pool (two threads on a 2-core machine) such work holds
/// a thread the code under test needs: two at once starve an in-process server that is to
/// answer them, and one holds every answer the test times (a `pg_ctl start -w` while a load
/// runs made a 0.3 s answer look like 13 s).
public func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

/// ``onOwnThread(_:)`` for work that cannot fail.
public func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}
