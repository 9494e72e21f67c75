import Dispatch
import Foundation

/// Routes SIGTERM and SIGINT to a handler on a background queue instead of killing the process,
/// so that the worker can stop taking work, finish what is in flight and sync the journal.
///
/// `@unchecked Sendable`: the sources are created and resumed in `init` and never touched again;
/// they are kept only so they stay alive.
public final class SignalHandlers: @unchecked Sendable {
    private let sources: [any DispatchSourceSignal]

    public init(_ signals: [Int32] = [SIGTERM, SIGINT], handler: @escaping @Sendable (Int32) -> Void) {
        let queue = DispatchQueue(label: "chime.signals")
        sources = signals.map { signo in
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
            source.setEventHandler { handler(signo) }
            source.resume()
            return source
        }
    }
}
