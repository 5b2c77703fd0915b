/// Suspends each arriving task until `count` have arrived, then releases them all at once: the
/// start line of a race a test runs many times.
public actor Barrier {
    public let count: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public init(count: Int) { self.count = count }

    public func arrive() async {
        await withCheckedContinuation { continuation in
            waiting.append(continuation)
            if waiting.count == count {
                for waiter in waiting { waiter.resume() }
                waiting = []
            }
        }
    }
}
