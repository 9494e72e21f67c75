import Foundation

/// Runs the `chime` command line; returns the exit status.
public func chimeMain(_ arguments: [String]) -> Int32 {
    FileHandle.standardError.write(Data("chime: not implemented yet\n".utf8))
    return 2
}
