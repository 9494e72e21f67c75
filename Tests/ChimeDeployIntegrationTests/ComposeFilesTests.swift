import ChimeMQTT
import ChimeSupport
import ChimeTestSupport
import Foundation
import Testing

/// deploy/compose and the images it builds, checked for what can be checked without a container
/// engine: the files they name exist and are in the build contexts, the ports are bounded, the
/// paths of the broker's configuration are the volumes' paths, make-test-ca's certificate serves
/// the TLS listener. scripts/compose-smoke runs the stack itself (docs/production.md).
@Suite struct ComposeFilesTests {
    static let compose = "deploy/compose/compose.yaml"
    static let composeBroker = "deploy/compose/mosquitto.conf"
    static let dockerfiles = [
        "deploy/container/Dockerfile", "deploy/container/Dockerfile.prebuilt", "deploy/container/Dockerfile.mosquitto",
    ]

    /// One service of compose.yaml: the lines nested under it.
    static func service(_ name: String) throws -> YAMLLines {
        let services = YAMLLines(try Repository.text(compose)).block("services")
        let service = services.block(name)
        #expect(!service.lines.isEmpty, "compose.yaml has no service \(name)")
        return service
    }

    /// The `- source:target[:mode]` entries of a service's `volumes`.
    static func mounts(_ service: YAMLLines) -> [(source: String, target: String, readOnly: Bool)] {
        service.block("volumes").trimmed.compactMap { line in
            guard line.hasPrefix("- ") else { return nil }
            let parts = withDefaults(String(line.dropFirst(2))).split(separator: ":").map(String.init)
            guard parts.count >= 2 else { return nil }
            return (parts[0], parts[1], parts.count > 2 && parts[2] == "ro")
        }
    }

    /// `${NAME:-default}` replaced by its default, as compose does when NAME is not set.
    static func withDefaults(_ text: String) -> String {
        text.replacing(/\$\{[A-Z_]+:-([^}]*)\}/) { String($0.output.1) }
    }

    @Test func theServicesNameFilesThatExist() throws {
        let services = ["mosquitto", "chimed", "accounts", "setup", "certs"]
        var named: Set<String> = []
        for name in services {
            let service = try Self.service(name)
            if let dockerfile = service.block("build").value("dockerfile") {
                let path = Self.withDefaults(dockerfile)
                #expect(FileManager.default.fileExists(atPath: Repository.path(path)), "\(name): \(path)")
                #expect(service.block("build").value("context") == "../..", "\(name): the context is the repository")
            }
            for mount in Self.mounts(service) {
                let source = mount.source
                if source.hasPrefix(".") {
                    // Bind mounts: the repository's files, or the certificates' directory an operator fills.
                    if source != "./certs" {
                        #expect(
                            FileManager.default.fileExists(atPath: Repository.path("deploy/compose/\(source)")),
                            "\(name) mounts \(source), which does not exist"
                        )
                    }
                } else {
                    named.insert(source)
                }
            }
        }
        // Every named volume mounted is declared, and every one declared is mounted.
        let lines = try Repository.text(Self.compose).split(separator: "\n")
        let topLevel = try #require(lines.firstIndex(of: "volumes:"), "compose.yaml declares no volumes")
        let declared = Set(
            lines[(topLevel + 1)...].prefix { $0.hasPrefix(" ") || $0.isEmpty }
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0.hasSuffix(":") }.map {
                    String($0.dropLast())
                }
        )
        #expect(declared == named, "declared \(declared.sorted()), mounted \(named.sorted())")
        // The other services' images are the two built ones.
        for name in services {
            let image = try Self.service(name).value("image")
            #expect(image == "chime:latest" || image == "chime-mosquitto:latest", "\(name): \(image ?? "none")")
        }
        // The tools run only by hand.
        for name in ["accounts", "setup", "certs"] {
            #expect(try Self.service(name).value("profiles") == #"["tools"]"#, "\(name)")
        }
    }

    @Test func onlyTheTLSListenerIsPublishedAndMetricsOnLoopback() throws {
        let mosquitto = try Self.service("mosquitto")
        #expect(mosquitto.block("ports").trimmed == [#"- "${MQTTS_PORT:-8883}:8883""#])
        let chimed = try Self.service("chimed")
        #expect(chimed.block("ports").trimmed == [#"- "127.0.0.1:${METRICS_PORT:-9464}:9464""#])
        // No other service publishes anything; the one-shot ones have no network at all.
        for name in ["accounts", "setup", "certs"] {
            let service = try Self.service(name)
            #expect(service.block("ports").lines.isEmpty, "\(name)")
            #expect(service.value("network_mode") == "none", "\(name)")
        }
        // The broker's plain listener is the compose network's only: 1883 in the configuration, not
        // in any published port.
        let config = BrokerConfigLines(try Repository.text(Self.composeBroker))
        #expect(config.lines.filter { $0.key == "listener" }.map(\.value) == ["1883", "8883"])
        #expect(!(try Repository.text(Self.compose)).contains(#"- "1883"#))
    }

    /// The broker finds its files where the compose file mounts them, and `chime accounts` writes
    /// the public key and deny list where the broker reads them.
    @Test func theBrokersPathsAreTheVolumesPaths() throws {
        let config = BrokerConfigLines(try Repository.text(Self.composeBroker))
        let mounts = Self.mounts(try Self.service("mosquitto"))
        func directory(_ path: String) -> String { (path as NSString).deletingLastPathComponent }
        for key in [
            "password_file", "acl_file", "plugin_opt_public_key", "plugin_opt_deny_file", "plugin_opt_password_file",
            "certfile", "keyfile",
        ] {
            let path = try #require(config.value(key), "\(key)")
            #expect(mounts.contains { $0.target == directory(path) }, "\(key) \(path) is in no volume of mosquitto")
        }
        let persistence = try #require(config.value("persistence_location"))
        #expect(mounts.contains { $0.target + "/" == persistence && !$0.readOnly })
        #expect(mounts.contains { $0.target == "/etc/mosquitto/mosquitto.conf" && $0.source == "./mosquitto.conf" })
        // The broker only reads what others write.
        for mount in mounts where mount.target != "/var/lib/mosquitto" && mount.target != "/etc/mosquitto/accounts" {
            #expect(mount.readOnly, "mosquitto mounts \(mount.target) writable")
        }
        let accounts = try Self.service("accounts").block("environment")
        #expect(accounts.value("CHIME_PUBLIC_KEY") == config.value("plugin_opt_public_key"))
        #expect(accounts.value("CHIME_DENY_FILE") == config.value("plugin_opt_deny_file"))
        // The broker image's chime-accounts edits the files the broker reads.
        let image = try Repository.text("deploy/container/Dockerfile.mosquitto")
        #expect(image.contains("CHIME_PASSWORD_FILE=\(config.value("password_file") ?? "")"))
        #expect(image.contains("CHIME_ACL_FILE=\(config.value("acl_file") ?? "")"))
        #expect(config.value("plugin") == "/usr/local/lib/chime/chime_auth.so")
        #expect(image.contains("/usr/local/lib/chime/chime_auth.so"))
        // chimed reads its passwords where setup writes them.
        let chimed = try Self.service("chimed")
        let passwordDirectory = try #require(chimed.block("environment").value("CHIME_PASSWORD_DIR"))
        #expect(Self.mounts(chimed).contains { $0.target == passwordDirectory && $0.readOnly })
        #expect(Self.mounts(try Self.service("setup")).contains { $0.target == passwordDirectory && !$0.readOnly })
    }

    /// Each named volume mounted writable is made by the image that mounts it, so that a new
    /// volume starts owned by the user who writes it rather than by root.
    @Test func everyVolumeMountPointIsMadeByItsImage() throws {
        let images = [
            "chime:latest": try Repository.text("deploy/container/Dockerfile"),
            "chime-mosquitto:latest": try Repository.text("deploy/container/Dockerfile.mosquitto"),
        ]
        for name in ["mosquitto", "chimed", "accounts", "setup", "certs"] {
            let service = try Self.service(name)
            let dockerfile = try #require(images[service.value("image") ?? ""])
            for mount in Self.mounts(service) where !mount.source.hasPrefix(".") && !mount.readOnly {
                #expect(dockerfile.contains(mount.target), "\(name): \(mount.target) is not made by its image")
            }
        }
    }

    /// Each Dockerfile copies files that exist and that its `.dockerignore` lets into the context.
    @Test(arguments: dockerfiles)
    func theDockerfileCopiesFilesOfItsContext(dockerfile: String) throws {
        let text = try Repository.text(dockerfile).replacingOccurrences(of: "\\\n", with: " ")
        let allowed = try Repository.text(dockerfile + ".dockerignore").split(separator: "\n")
            .filter { $0.hasPrefix("!") }.map { String($0.dropFirst()) }
            .map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        #expect(try Repository.text(dockerfile + ".dockerignore").split(separator: "\n").contains("*"))
        var copied = 0
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ").map(String.init)
            guard words.first == "COPY", !words.contains(where: { $0.hasPrefix("--from") }) else { continue }
            for source in words.dropFirst().dropLast() where !source.hasPrefix("--") {
                copied += 1
                #expect(
                    allowed.contains { source == $0 || source.hasPrefix($0 + "/") },
                    "\(dockerfile): \(source) is ignored"
                )
                // The prebuilt binaries are made by make container-binaries, not kept in the repository.
                if !source.hasPrefix(".build/") {
                    #expect(FileManager.default.fileExists(atPath: Repository.path(source)), "\(dockerfile): \(source)")
                }
            }
        }
        #expect(copied > 0)
        // And the ignore file lets in nothing the Dockerfile does not use.
        for entry in allowed {
            #expect(text.contains(entry), "\(dockerfile): \(entry) is let in and not used")
        }
    }

    /// The prebuilt image is Dockerfile's, with the binaries copied in instead of built.
    @Test func thePrebuiltImageHasDockerfilesRuntimeStage() throws {
        func runtime(_ file: String) throws -> [Substring] {
            let text = try Repository.text(file)
            let stage = try #require(text.range(of: "# --- Runtime"), "\(file)")
            return text[stage.lowerBound...].split(separator: "\n").filter { !$0.hasPrefix("COPY .build/") }
                .filter { !$0.hasPrefix("COPY --from=build ") }
        }
        #expect(try runtime("deploy/container/Dockerfile") == runtime("deploy/container/Dockerfile.prebuilt"))
        let prebuilt = try Repository.text("deploy/container/Dockerfile.prebuilt")
        #expect(prebuilt.contains("COPY .build/container/chimed .build/container/chime /usr/local/bin/"))
        // make container-binaries puts them there.
        let makefile = try Repository.text("Makefile")
        #expect(makefile.contains(".build/container/chimed") && makefile.contains(".build/container/chime\n"))
    }

    /// make-test-ca's certificate serves the compose broker's TLS listener (its lines as shipped,
    /// on a free loopback port) to a device that trusts only the test CA and logs in with a token;
    /// the broker keeps the device to its own topics there.
    @Test func aTokenDeviceConnectsOverTLSWithTheTestCA() async throws {
        let files = try TemporaryDirectory(prefix: "chime-compose-tls")
        let make = try ChildProcess(
            Repository.path("deploy/compose/make-test-ca"),
            arguments: ["--dir", files.appending("certs"), "localhost", "127.0.0.1"]
        )
        try make.start()
        #expect(await make.waitForExit(timeout: .seconds(30)) == .exited(0), "\(make.standardErrorLines)")
        // It refuses to replace what it made (real certificates put there, say).
        let again = try ChildProcess(
            Repository.path("deploy/compose/make-test-ca"),
            arguments: ["--dir", files.appending("certs")]
        )
        try again.start()
        #expect(await again.waitForExit(timeout: .seconds(30)) == .exited(1))
        for (file, mode) in [("broker-key.pem", 0o600), ("ca-key.pem", 0o600), ("ca.pem", 0o644)] {
            let attributes = try FileManager.default.attributesOfItem(atPath: files.appending("certs/\(file)"))
            #expect((attributes[.posixPermissions] as? Int) == mode, "\(file)")
        }

        _ = try await ChimeAuthPlugin.build()
        let tokens = try await TokenFiles.make(in: files)
        let acl = files.appending("chime.acl")
        try Repository.text(Repository.acl).write(toFile: acl, atomically: true, encoding: .utf8)
        let passwords = files.appending("chime.passwd")
        try "".write(toFile: passwords, atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: files.appending("data"), withIntermediateDirectories: false)
        var lines = try ProductionBroker.configurationLines(
            config: Self.composeBroker,
            passwordFile: passwords,
            aclFile: acl,
            persistenceDirectory: files.appending("data"),
            tokens: tokens
        )
        // The compose file's TLS listener, on a port of this test, with make-test-ca's files.
        let config = BrokerConfigLines(try Repository.text(Self.composeBroker))
        let tlsPort = try TestBroker.freePort()
        lines += [
            "listener \(tlsPort) 127.0.0.1", "use_username_as_clientid true",
            "certfile \(files.appending("certs/broker-fullchain.pem"))",
            "keyfile \(files.appending("certs/broker-key.pem"))",
            "tls_version \(config.value("tls_version") ?? "")",
        ]
        let broker = try await TestBroker.start(.init(extraLines: lines))
        func device(_ name: String, token: String, ca: String) -> MQTTOptions {
            var options = MQTTOptions(host: "127.0.0.1", port: tlsPort)
            options.clientId = name
            options.username = name
            options.password = token
            options.useTLS = true
            options.tlsCAFile = ca
            return options
        }
        let token = try await tokens.add("phone-1")
        let phone = try MQTTRequester(options: device("phone-1", token: token, ca: files.appending("certs/ca.pem")))
        defer { phone.stop() }
        try await phone.connect(timeout: .seconds(10))
        let refused = try await phone.publish(topic: "chime/phone-2/cmd/list", payload: [], timeout: .seconds(10))
        #expect(refused == 0x87)

        // Without the test CA (the system's instead), the handshake fails.
        let untrusting = try MQTTRequester(
            options: device("phone-1", token: token, ca: "/etc/ssl/certs/ca-certificates.crt")
        )
        defer { untrusting.stop() }
        await #expect(throws: (any Error).self) { try await untrusting.connect(timeout: .seconds(5)) }
        await broker.stop()
    }
}
