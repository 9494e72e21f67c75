import ChimeHTTP
import ChimeTestSupport
import Foundation
import Testing

/// HTTPS with a certificate made by the `openssl` tool (``TestCertificates``), fetched by `curl`
/// trusting its CA.
@Suite struct HTTPServerTLSTests {
    @Test func debiansLibmicrohttpdHasTLS() {
        #expect(HTTPServer.TLS.isAvailable)
    }

    @Test func pagesAndFormsAreServedOverTLSOnly() async throws {
        let directory = try TemporaryDirectory()
        let certificates = try await TestCertificates.make(in: directory)
        let tls = try HTTPServer.TLS(certificateFile: certificates.certificateFile, keyFile: certificates.keyFile)
        let recorder = HTTPServerFormTests.Recorder()
        let server = try HTTPServerFormTests.server(recorder, tls: tls)
        let base = "https://127.0.0.1:\(server.port)"

        let page = try await HTTPServerFormTests.curl(["--cacert", certificates.caFile, "\(base)/page?x=1"])
        #expect(page.status == .exited(0), "\(page.output)")
        #expect(page.output.first?.hasPrefix("HTTP/1.1 200") == true, "\(page.output)")
        #expect(page.output.last == "GET 0 bytes")
        #expect(recorder.last?.query == "x=1")
        #expect(recorder.last?.remoteAddress == "127.0.0.1")

        // A form, as curl posts one (`Content-Type: application/x-www-form-urlencoded`).
        let form = try await HTTPServerFormTests.curl([
            "--cacert", certificates.caFile, "--data-binary", "a=1&b=%C3%A9", "\(base)/form",
        ])
        #expect(form.status == .exited(0), "\(form.output)")
        #expect(form.output.first?.hasPrefix("HTTP/1.1 303") == true, "\(form.output)")
        #expect(form.output.contains("Set-Cookie: session=abc; HttpOnly; SameSite=Strict"), "\(form.output)")
        #expect(formText(recorder.last?.form) == ["a=1", "b=é"])
        #expect(recorder.count == 2)

        // Not without trusting the CA, and not in plain HTTP: neither reaches the handler.
        let untrusted = try await HTTPServerFormTests.curl(["\(base)/page"])
        #expect(untrusted.status != .exited(0))
        let plain = try HTTPProbe.exchange(port: Int(server.port), Array("GET /page HTTP/1.0\r\n\r\n".utf8))
        #expect(!String(decoding: plain, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        #expect(recorder.count == 2)
    }

    /// The handshake counts in the request time: a client that connects and says nothing is closed.
    @Test func aHandshakeNeverMadeIsClosedAtTheRequestTime() async throws {
        let directory = try TemporaryDirectory()
        let certificates = try await TestCertificates.make(in: directory)
        let tls = try HTTPServer.TLS(certificateFile: certificates.certificateFile, keyFile: certificates.keyFile)
        let limits = HTTPServerFormTests.limits(requestTime: .seconds(1))
        let server = try HTTPServerFormTests.server(HTTPServerFormTests.Recorder(), limits: limits, tls: tls)
        let started = ContinuousClock.now
        let silent = try HTTPProbe.Connection(port: Int(server.port))
        let (bytes, closed) = silent.receiveUntilClosed(timeout: .seconds(10))
        #expect(closed)
        // Nothing, or a TLS alert (close_notify) if libmicrohttpd's idle timeout closed it first.
        #expect(bytes.isEmpty || bytes.first == 21, "\(bytes)")
        #expect(ContinuousClock.now - started >= limits.requestTime)
        // The positive control: a client that shakes hands is answered.
        let page = try await HTTPServerFormTests.curl([
            "--cacert", certificates.caFile, "https://127.0.0.1:\(server.port)/page",
        ])
        #expect(page.status == .exited(0), "\(page.output)")
    }

    @Test func aCertificateOrKeyThatCannotServeIsAClearError() async throws {
        let directory = try TemporaryDirectory()
        let certificates = try await TestCertificates.make(in: directory)
        let good = try HTTPServer.TLS(certificateFile: certificates.certificateFile, keyFile: certificates.keyFile)
        // The CA's key is not the certificate's.
        let otherKey = try HTTPServer.TLS(
            certificateFile: certificates.certificateFile,
            keyFile: directory.appending("ca.key")
        )
        for bad in [
            otherKey, HTTPServer.TLS(certificate: "not a certificate", key: good.key),
            HTTPServer.TLS(certificate: good.certificate, key: "not a key"), HTTPServer.TLS(certificate: "", key: ""),
        ] {
            #expect(throws: HTTPError(.badTLS, "")) {
                try HTTPServer(listen: "127.0.0.1:0", tls: bad) { _ in .init(status: 200, "") }
            }
        }
        #expect(throws: HTTPError(.badTLS, "")) {
            try HTTPServer.TLS(certificateFile: directory.appending("missing.crt"), keyFile: certificates.keyFile)
        }
        // A key file others may read is refused, with the mend in the message; 0640 is allowed.
        let shared = directory.appending("shared.key")
        try FileManager.default.copyItem(atPath: certificates.keyFile, toPath: shared)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: shared)
        do {
            _ = try HTTPServer.TLS(certificateFile: certificates.certificateFile, keyFile: shared)
            Issue.record("a key file of mode 0644 was taken")
        } catch {
            #expect(error.message.contains("mode 0644") && error.message.contains("chmod 600"), "\(error)")
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: shared)
        _ = try HTTPServer.TLS(certificateFile: certificates.certificateFile, keyFile: shared)
        // What a log shows of it leaves the key out.
        #expect(good.key.contains("PRIVATE KEY"))
        #expect(!"\(good)".contains("PRIVATE KEY"))
        // The positive control.
        _ = try HTTPServer(listen: "127.0.0.1:0", tls: good) { _ in .init(status: 200, "") }
    }
}
