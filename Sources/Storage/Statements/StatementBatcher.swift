import NIOPosix
import Synchronization

/// Runs the work of concurrent callers as batches, at most ``maxRunning`` batches at a time
/// (decision 0030). A caller that finds a batch slot free starts a batch at once, so a lone
/// request waits for nobody; callers that arrive while every slot is busy wait together and
/// go as the next batch when a slot frees. Under load batches grow by themselves, and each
/// costs one statement, one round trip and one commit whatever its size.
///
/// A batch runs in a task of its own, bounded by `timeout`: a caller's cancellation (its
/// request deadline) never cancels the statement the others wait on, and a statement that
/// never answers (a connection that died without a word) fails its batch by the timeout and
/// frees the slot. Every caller is resumed exactly once, with its own output or its batch's
/// error.
final class StatementBatcher<Input: Sendable, Output: Sendable>: Sendable {
    typealias Execute = @Sendable ([Input]) async throws -> [Output]

    private struct Waiter {
        let input: Input
        let continuation: CheckedContinuation<Output, any Error>
    }

    private struct State {
        var waiting: [Waiter] = []
        var head = 0
        var running = 0
        var batches = 0
        var inputs = 0
        /// Those who wait for so many callers to be waiting (``untilWaiting(_:)``).
        var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    /// Callers waiting for a slot.
    var waitingCount: Int { state.withLock { $0.waiting.count - $0.head } }

    /// Returns once at least `count` callers wait for a slot (already, or from now on): an
    /// event for tests that line callers up behind a busy slot.
    func untilWaiting(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                guard state.waiting.count - state.head < count else { return true }
                state.watchers.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Batches running now.
    var runningCount: Int { state.withLock { $0.running } }

    /// Batches run so far and the inputs they carried.
    var totals: (batches: Int, inputs: Int) { state.withLock { ($0.batches, $0.inputs) } }

    let maxRunning: Int
    let maxBatch: Int
    let timeout: Duration
    private let execute: Execute
    private let state = Mutex(State())

    init(maxRunning: Int, maxBatch: Int, timeout: Duration, execute: @escaping Execute) {
        precondition(maxRunning > 0 && maxBatch > 0)
        self.maxRunning = maxRunning
        self.maxBatch = maxBatch
        self.timeout = timeout
        self.execute = execute
    }

    func run(_ input: Input) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            let (start, watched) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                state.waiting.append(Waiter(input: input, continuation: continuation))
                var watched: [CheckedContinuation<Void, Never>] = []
                if !state.watchers.isEmpty {
                    let waiting = state.waiting.count - state.head
                    state.watchers.removeAll { watcher in
                        guard watcher.count <= waiting else { return false }
                        watched.append(watcher.continuation)
                        return true
                    }
                }
                guard state.running < maxRunning else { return (false, watched) }
                state.running += 1
                return (true, watched)
            }
            for watcher in watched { watcher.resume() }
            if start {
                let preference = MultiThreadedEventLoopGroup.currentEventLoop.map { EventLoopTaskExecutor.executor(for: $0) }
                Task(executorPreference: preference) { await self.drain(on: preference) }
            }
        }
    }

    /// Runs batches while callers wait, then gives the slot back. The slot passes to the next
    /// batch, or is given back, before a batch's callers are answered: a caller answered never
    /// finds its own batch still holding the slot (a loaded CI run saw a caller answered by the
    /// timeout look while the drain had not yet given the slot back).
    ///
    /// Each batch's work runs on the drain's own executor (`preference`: the event loop of the
    /// caller that started it), not the global pool's: its task under the deadline starts and
    /// ends on the thread the drain runs on, with no hand-over to another thread and back
    /// (decision 0096).
    private func drain(on preference: (any TaskExecutor)?) async {
        var next = nextBatch()
        while let batch = next {
            let inputs = batch.map(\.input)
            let execute = execute
            let result: Result<[Output], any Error>
            do {
                // `execute` sets the batch's tenant scope: the drain task inherits the scope of the
                // caller that started it, and a batch may carry other tenants' work.
                let outputs = try await withDatabaseDeadline(timeout, executorPreference: preference) {
                    try await execute(inputs)
                }
                result = outputs.count == inputs.count ? .success(outputs) : .failure(BatchMismatch())
            } catch {
                result = .failure(error)
            }
            next = nextBatch()
            for (index, waiter) in batch.enumerated() {
                waiter.continuation.resume(with: result.map { $0[index] })
            }
        }
    }

    private func nextBatch() -> [Waiter]? {
        state.withLock { state in
            let available = state.waiting.count - state.head
            guard available > 0 else {
                state.running -= 1
                state.waiting.removeAll(keepingCapacity: true)
                state.head = 0
                return nil
            }
            let end = state.head + min(available, maxBatch)
            let batch = Array(state.waiting[state.head..<end])
            state.batches += 1
            state.inputs += batch.count
            state.head = end
            if state.head == state.waiting.count {
                state.waiting.removeAll(keepingCapacity: true)
                state.head = 0
            } else if state.head >= 256 {
                state.waiting.removeFirst(state.head)
                state.head = 0
            }
            return batch
        }
    }
}

/// The batch's work returned a different number of outputs than it was given inputs.
struct BatchMismatch: Error {}
