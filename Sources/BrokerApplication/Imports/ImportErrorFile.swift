import BrokerCore
import Foundation

/// The lines of an import that were not imported (issue 24), beside the input as
/// `<input>.errors.jsonl`: one JSON object per line with the 1-based `line`, the `kind`
/// (`error`, `skipped` or `conflict`), the `external_id` when known and the `reason`. Each
/// batch's lines are written before the batch commits, and the job records the file's length
/// with the batch: a resumed job cuts the file back to that length, so a batch that did not
/// commit leaves no lines behind and none is written twice.
package final class ImportErrorFile {
    package struct Entry: Sendable, Equatable {
        package enum Kind: String, Sendable { case error, skipped, conflict }
        package let line: Int
        package let kind: Kind
        package let externalID: String?
        package let reason: String
    }

    package let path: String
    private let handle: FileHandle
    /// The length up to the end of the last committed batch.
    private(set) var committedBytes: Int64
    /// The length after the batch written last.
    private var writtenBytes: Int64

    /// Opens (or creates) the file and cuts it to `length`: 0 for a new job, the job's
    /// recorded length for a resumed one.
    package init(path: String, length: Int64) throws {
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
            }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
        }
        self.path = path
        self.handle = handle
        let size = try handle.seekToEnd()
        committedBytes = min(length, Int64(size))
        writtenBytes = committedBytes
        try handle.truncate(atOffset: UInt64(committedBytes))
    }

    deinit { try? handle.close() }

    /// Writes a batch's entries after the last committed batch (a batch tried again replaces
    /// its own lines) and returns the file's new length, which the batch records.
    package func writeBatch(_ entries: [Entry]) throws -> Int64 {
        try handle.truncate(atOffset: UInt64(committedBytes))
        try handle.seek(toOffset: UInt64(committedBytes))
        var bytes: [UInt8] = []
        for entry in entries {
            var writer = JSONWriter(capacity: 160)
            writer.beginObject()
            writer.member("line", entry.line)
            writer.member("kind", entry.kind.rawValue)
            writer.member("external_id", entry.externalID)
            writer.member("reason", entry.reason)
            writer.endObject()
            bytes.append(contentsOf: writer.bytes)
            bytes.append(UInt8(ascii: "\n"))
        }
        if !bytes.isEmpty { try handle.write(contentsOf: bytes) }
        writtenBytes = committedBytes + Int64(bytes.count)
        return writtenBytes
    }

    /// The batch written last committed: its lines stay.
    package func commit() { committedBytes = writtenBytes }
}
