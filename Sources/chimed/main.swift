import ChimeCore
import ChimeSupport
import ChimeWiring
import ChimeWorker
import Foundation

// chimed: parse flags, build the worker, run it. Exit 0 after a clean stop, 1 when the worker
// cannot run (data directory, journal, sync), 2 on a usage mistake.

let usage = "usage: chimed [options]   (every option also reads CHIME_<NAME>, e.g. CHIME_DATA_DIR)"
let flags: Flags
let configuration: WorkerConfiguration
do throws(UsageError) {
    flags = try Flags(Array(CommandLine.arguments.dropFirst()), specs: WorkerConfiguration.flagSpecs)
    if flags.isSet("help") {
        print(
            Flags.help(
                usage: usage,
                specs: WorkerConfiguration.flagSpecs,
                footer: "Protocol: PROTOCOL.md. Docs: README.md."
            )
        )
        exit(0)
    }
    if flags.isSet("version") {
        print("chimed \(chimeVersion)")
        exit(0)
    }
    if let extra = flags.positional.first { throw UsageError("unexpected argument \"\(extra)\"") }
    configuration = try WorkerConfiguration(flags: flags)
} catch {
    FileHandle.standardError.write(Data((error.report(program: "chimed") + "\n").utf8))
    exit(UsageError.exitStatus)
}

let logger = Logger(level: configuration.logLevel, format: configuration.logFormat)
let worker = Worker(configuration: configuration, logger: logger)
let signals = SignalHandlers([SIGTERM, SIGINT, SIGUSR1, SIGHUP]) { signo in
    if signo == SIGUSR1 {
        logger.notice("received SIGUSR1: taking a snapshot")
        worker.requestSnapshot()
        return
    }
    if signo == SIGHUP {
        logger.notice("received SIGHUP: reading the zone rules again")
        worker.requestZoneCheck()
        return
    }
    logger.notice("received \(signo == SIGTERM ? "SIGTERM" : "SIGINT")")
    worker.stop()
}
do throws(WorkerError) {
    try worker.run()
    exit(0)
} catch {
    FileHandle.standardError.write(Data("chimed: \(error.message)\n".utf8))
    exit(1)
}
