import Foundation

/// `chime-bench <benchmark> [--quick]`. Each benchmark prints its own table.
let arguments = Array(CommandLine.arguments.dropFirst())
let quick = arguments.contains("--quick")
switch arguments.first {
case "recurrence":
    RecurrenceBenchmark(quick: quick).run()
default:
    FileHandle.standardError.write(Data("usage: chime-bench recurrence [--quick]\n".utf8))
    exit(2)
}
