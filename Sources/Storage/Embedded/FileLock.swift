import Foundation

import Glibc

/// An advisory `flock(2)` lock on a file. Released when closed or when the process dies.
final class FileLock: @unchecked Sendable {
    private var descriptor: Int32

    init(path: String) throws {
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StorageError.embeddedPostgres("Cannot open lock file \(path): \(String(cString: strerror(errno))).")
        }
    }

    func lockShared() { _ = flock(descriptor, LOCK_SH) }
    func lockExclusive() { _ = flock(descriptor, LOCK_EX) }
    func tryLockExclusive() -> Bool { flock(descriptor, LOCK_EX | LOCK_NB) == 0 }
    func unlock() { _ = flock(descriptor, LOCK_UN) }

    func close() {
        if descriptor >= 0 {
            _ = Glibc.close(descriptor)
            descriptor = -1
        }
    }

    deinit { close() }
}
