import Foundation

/// A throw-away certificate authority and a server certificate it signed for `localhost` and
/// `127.0.0.1`, made with the `openssl` command (EC P-256, valid one day), for TLS tests.
public struct TestCertificates: Sendable {
    /// The CA certificate (PEM): what a client trusts.
    public let caFile: String
    /// The server certificate (PEM), for the broker's `certfile`.
    public let certificateFile: String
    /// The server's private key (PEM), for the broker's `keyfile`.
    public let keyFile: String

    /// Creates the files in `directory`.
    /// - Throws: `HarnessError` if `openssl` is missing or fails.
    public static func make(in directory: TemporaryDirectory) async throws -> TestCertificates {
        let certificates = TestCertificates(
            caFile: directory.appending("ca.crt"),
            certificateFile: directory.appending("server.crt"),
            keyFile: directory.appending("server.key")
        )
        let extensions = directory.appending("server.ext")
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(toFile: extensions, atomically: true, encoding: .utf8)
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try await run(
            ["req", "-x509"] + key
                + ["-keyout", directory.appending("ca.key"), "-out", certificates.caFile]
                + ["-days", "1", "-subj", "/CN=Chime test CA"]
        )
        try await run(
            ["req"] + key
                + [
                    "-keyout", certificates.keyFile, "-out", directory.appending("server.csr"), "-subj",
                    "/CN=localhost",
                ]
        )
        try await run([
            "x509", "-req", "-in", directory.appending("server.csr"), "-CA", certificates.caFile,
            "-CAkey", directory.appending("ca.key"), "-CAcreateserial", "-out", certificates.certificateFile,
            "-days", "1", "-extfile", extensions,
        ])
        return certificates
    }

    private static func run(_ arguments: [String]) async throws {
        guard ChildProcess.find("openssl") != nil else {
            throw HarnessError("openssl is not installed: run `make test`, or apt-get install openssl")
        }
        let openssl = try ChildProcess("openssl", arguments: arguments)
        try openssl.start()
        let termination = await openssl.waitForExit(timeout: .seconds(30))
        guard termination == .exited(0) else {
            let output = (openssl.standardErrorLines + openssl.standardOutputLines).joined(separator: "\n")
            throw HarnessError(
                "openssl \(arguments.first ?? "") failed (\(String(describing: termination))): \(output)"
            )
        }
    }
}
