import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import Storage

/// The batcher on its own (decision 0030): a lone caller goes at once, callers that arrive
/// while every slot is busy go together, each gets its own output or its batch's error, and
/// nothing a caller or a statement does can hold the others.
@Suite struct StatementBatcherTests {
    /// A batch's work that waits, batch after batch, until the test lets it go.
    final class Gate: Sendable {
        private struct State {
            var open = false
            var waiters: [CheckedContinuation<Void, Never>] = []
            var sizes: [Int] = []
            var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        }
        private let state = Mutex(State())

        func record(_ inputs: [Int]) async {
            let (wait, arrived) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                state.sizes.append(inputs.count)
                let batches = state.sizes.count
                var arrived: [CheckedContinuation<Void, Never>] = []
                state.watchers.removeAll { watcher in
                    guard watcher.count <= batches else { return false }
                    arrived.append(watcher.continuation)
                    return true
                }
                return (!state.open, arrived)
            }
            for watcher in arrived { watcher.resume() }
            guard wait else { return }
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.open { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }

        func open() {
            let waiters = state.withLock { state in
                state.open = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }

        var sizes: [Int] { state.withLock { $0.sizes } }

        /// Returns once `count` batches have reached the gate (already, or from now on).
        func untilBatches(_ count: Int) async {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    guard state.sizes.count < count else { return true }
                    state.watchers.append((count, continuation))
                    return false
                }
                if now { continuation.resume() }
            }
        }
    }

    struct Refused: Error {}

    static func outcome(_ body: @Sendable () async throws -> Int) async -> Result<Int, any Error> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    @Test func aLoneCallerGoesAtOnce() async throws {
        let batcher = StatementBatcher<Int, Int>(maxRunning: 2, maxBatch: 8, timeout: .seconds(5)) { $0.map { $0 * 2 } }
        #expect(try await batcher.run(21) == 42)
        #expect(try await batcher.run(4) == 8)
        #expect(batcher.totals == (batches: 2, inputs: 2))
    }

    @Test func callersThatArriveWhileEverySlotIsBusyGoTogetherInBatchesOfAtMostMaxBatch() async throws {
        let gate = Gate()
        let batcher = StatementBatcher<Int, Int>(maxRunning: 1, maxBatch: 4, timeout: .seconds(30)) { inputs in
            await gate.record(inputs)
            return inputs.map { $0 + 100 }
        }
        try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            group.addTask { (0, try await batcher.run(0)) }
            // The first batch holds the only slot; ten more callers wait.
            await gate.untilBatches(1)
            for input in 1...10 { group.addTask { (input, try await batcher.run(input)) } }
            await batcher.untilWaiting(10)
            gate.open()
            var outputs: [Int: Int] = [:]
            for try await (input, output) in group { outputs[input] = output }
            #expect(outputs == Dictionary(uniqueKeysWithValues: (0...10).map { ($0, $0 + 100) }))
        }
        #expect(gate.sizes == [1, 4, 4, 2])
        #expect(batcher.totals == (batches: 4, inputs: 11))
    }

    @Test func atMostMaxRunningBatchesRunAtOnce() async throws {
        let running = Mutex((now: 0, most: 0))
        // The first batch waits at the gate until a second runs beside it; later ones pass.
        let gate = Gate()
        let batcher = StatementBatcher<Int, Int>(maxRunning: 2, maxBatch: 3, timeout: .seconds(30)) { inputs in
            let now = running.withLock {
                $0.now += 1; $0.most = max($0.most, $0.now); return $0.now
            }
            if now == 2 { gate.open() }
            await gate.record(inputs)
            running.withLock { $0.now -= 1 }
            return inputs
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for input in 0..<40 {
                group.addTask {
                    let output = try await batcher.run(input)
                    #expect(output == input)
                }
            }
            try await group.waitForAll()
        }
        #expect(running.withLock { $0.most } == 2)
        #expect(batcher.totals.inputs == 40 && batcher.totals.batches < 40)
    }

    @Test func aBatchsErrorReachesEveryCallerOfThatBatchAndNoOther() async throws {
        let gate = Gate()
        let batcher = StatementBatcher<Int, Int>(maxRunning: 1, maxBatch: 8, timeout: .seconds(30)) { inputs in
            await gate.record(inputs)
            if inputs.contains(-1) { throw Refused() }
            return inputs
        }
        try await withThrowingTaskGroup(of: (Int, Result<Int, any Error>).self) { group in
            group.addTask { (1, await Self.outcome { try await batcher.run(1) }) }
            await gate.untilBatches(1)
            for input in [2, -1, 3] { group.addTask { (input, await Self.outcome { try await batcher.run(input) }) } }
            await batcher.untilWaiting(3)
            gate.open()
            for try await (input, result) in group {
                switch input {
                case 1: #expect(try result.get() == 1)
                default: #expect(throws: Refused.self) { try result.get() }
                }
            }
        }
        // The slot is free again and the next caller goes alone.
        #expect(try await batcher.run(5) == 5)
    }

    @Test func aBatchThatNeverAnswersFailsByItsTimeoutAndFreesTheSlot() async throws {
        let batcher = StatementBatcher<Int, Int>(maxRunning: 1, maxBatch: 8, timeout: .milliseconds(200)) { inputs in
            if inputs.contains(0) { try await Task.sleep(for: .seconds(3_600)) }
            return inputs
        }
        let started = ContinuousClock.now
        await #expect(throws: DatabaseDeadlineExceeded.self) { try await batcher.run(0) }
        // Bounded by the timeout, not by the hour-long statement (a loaded test run can delay
        // the deadline wheel's 50 ms tick by seconds).
        #expect(ContinuousClock.now - started < .seconds(120))
        // The slot is free: nothing runs and nothing waits.
        #expect(batcher.runningCount == 0 && batcher.waitingCount == 0)
    }

    /// A caller is answered only once its batch gave the slot back (or passed it on): it never
    /// finds its own batch still running. A loaded CI run once saw the slot held just after a
    /// timeout's answer; each of these answers races the drain the same way, a thousand times.
    @Test func anAnsweredCallerNeverFindsItsBatchStillHoldingTheSlot() async throws {
        let batcher = StatementBatcher<Int, Int>(maxRunning: 1, maxBatch: 8, timeout: .seconds(30)) { $0 }
        for input in 0..<1_000 {
            #expect(try await batcher.run(input) == input)
            #expect(batcher.runningCount == 0, "after answer \(input)")
        }
    }

    @Test func aCancelledCallerDoesNotCancelTheBatchOthersWaitOn() async throws {
        let gate = Gate()
        let batcher = StatementBatcher<Int, Int>(maxRunning: 1, maxBatch: 8, timeout: .seconds(30)) { inputs in
            await gate.record(inputs)
            try Task.checkCancellation()
            return inputs
        }
        let first = Task { try await batcher.run(1) }
        await gate.untilBatches(1)
        let second = Task { try await batcher.run(2) }
        let third = Task { try await batcher.run(3) }
        await batcher.untilWaiting(2)
        first.cancel()
        second.cancel()
        gate.open()
        #expect(try await first.value == 1)
        #expect(try await second.value == 2)
        #expect(try await third.value == 3)
    }

    /// A batch's work runs on the event loop of the caller that started its drain, the thread
    /// that runs the drain itself, not on the global pool it would hop to and back from
    /// (decision 0096). Callers on each of two loops, one after another and several at once: every
    /// batch's work found itself on the loop its drain started on.
    @Test func aBatchsWorkRunsOnTheEventLoopItsDrainStartedOn() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        defer { group.shutdownGracefully { _ in } }
        let loops = [group.next(), group.next()]
        let batcher = StatementBatcher<Int, Int?>(maxRunning: 2, maxBatch: 8, timeout: .seconds(30)) { inputs in
            let here = loops.firstIndex { $0.inEventLoop }
            return inputs.map { _ in here }
        }
        for round in 0..<50 {
            let answers = try await withThrowingTaskGroup(of: (Int, Int?).self) { group in
                for caller in 0..<4 {
                    let loop = (round + caller) % 2
                    group.addTask(executorPreference: EventLoopTaskExecutor.executor(for: loops[loop])) {
                        (loop, try await batcher.run(caller))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            // A caller that joined a batch another caller's drain was running answers with that
            // loop; every batch ran on one of the two, never elsewhere.
            #expect(answers.allSatisfy { $0.1 != nil }, "round \(round): \(answers)")
        }
        let alone = try await Task(executorPreference: EventLoopTaskExecutor.executor(for: loops[1])) {
            try await batcher.run(0)
        }.value
        #expect(alone == 1)
    }
}
