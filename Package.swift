// swift-tools-version:6.0
import PackageDescription

/// One list of settings for every target, so the whole package compiles the same way. Warnings are
/// errors in every build `make` runs (`-Xswiftc -warnings-as-errors`, Makefile): not here, where it
/// would be an unsafe flag, which SwiftPM refuses in a package that an app adds by version.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny")
]

let package = Package(
    name: "Chime",
    // The client library's needs (Swift 6's Synchronization); the server runs on Linux.
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .executable(name: "chimed", targets: ["chimed"]),
        .executable(name: "chime", targets: ["chime"]),
        .executable(name: "chime-bench", targets: ["ChimeBench"]),
        .library(name: "ChimeClient", targets: ["ChimeClient"]),
        .library(name: "ChimeClientMQTT", targets: ["ChimeClientMQTT"]),
    ],
    targets: [
        // The C library, as Debian packages it. Only ChimeMQTT imports it.
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        // Debian's libmicrohttpd, for the metrics and health endpoint. Only ChimeHTTP imports it.
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        // Debian's libpq, the PostgreSQL client library, for the journal in PostgreSQL. Only
        // ChimePostgres imports it.
        .systemLibrary(
            name: "CPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // Debian's libcrypto (OpenSSL 3), for push delivery's signatures and encryption. Only
        // ChimeCrypto imports it.
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // Debian's libcurl (OpenSSL, nghttp2), for push notifications over HTTP/2. Only ChimeHTTPClient
        // imports it.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // The system's libcrypt (libxcrypt: yescrypt, bcrypt), for the console's password hashes. Only
        // ChimePassword imports it.
        .systemLibrary(
            name: "CCrypt",
            pkgConfig: "libcrypt",
            providers: [.apt(["libcrypt-dev"])]
        ),
        // Pure calendar arithmetic: instants, civil times, zones, ISO 8601, RRULE. Foundation only.
        .target(name: "ChimeTime", swiftSettings: swiftSettings),
        // JSON as RFC 8259 defines it, parsed and written exactly (errors with positions, integers that
        // stay integers, keys in order), and the "did you mean" of an unknown key or flag. Standard
        // library only.
        .target(name: "ChimeJSON", swiftSettings: swiftSettings),
        // Logging, no domain module: levels, the lines the worker's policy asks for, the logger that
        // writes them (text or JSON) to standard error, and the wall clock that stamps them.
        .target(name: "ChimeLog", dependencies: ["ChimeJSON", "ChimeTime"], swiftSettings: swiftSettings),
        // The wire protocol, pure: commands, replies, notification fields, command keys, and ChimeJSON
        // re-exported. All a client needs, and all the client library depends on (with ChimeTime).
        .target(name: "ChimeProtocol", dependencies: ["ChimeJSON", "ChimeTime"], swiftSettings: swiftSettings),
        // The engine, pure: the state machine of every device's notifications, fed commands,
        // time and acknowledgements, returning journal records and deliveries.
        .target(
            name: "ChimeEngine",
            dependencies: ["ChimeProtocol"],
            // Release builds drop the run-time exclusivity checks of the engine's classes (the
            // compiler's static ones stay, and debug builds, which the tests run, keep both): they
            // were 15 % of restoring a snapshot (docs/bench/scale.md). The client library does not
            // depend on it.
            swiftSettings: swiftSettings + [
                .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))
            ]
        ),
        // The worker's policy, pure: admission, the delivery window, snapshots, the broker session,
        // slots, zones, as events in and actions out (WorkerStateMachine, SlotOwnership).
        .target(name: "ChimeWorkerPolicy", dependencies: ["ChimeEngine", "ChimeLog"], swiftSettings: swiftSettings),
        // The three above, for the server's modules that use them all.
        .target(
            name: "ChimeCore",
            dependencies: ["ChimeProtocol", "ChimeEngine", "ChimeWorkerPolicy"],
            swiftSettings: swiftSettings
        ),
        // The store layer, pure: the WorkerStore seam the worker writes through, what a store recovers
        // (records, snapshots, replaying them into an engine), and the one background-snapshot helper.
        .target(
            name: "ChimeStore",
            dependencies: ["ChimeProtocol", "ChimeEngine", "ChimeWorkerPolicy"],
            swiftSettings: swiftSettings
        ),
        // CRC-32C with the processor's instruction, which Swift cannot name. Only ChimeJournal imports it.
        .target(name: "CCRC32C"),
        // The only code that touches the data directory: the journal, snapshots, and the engine's
        // state read from and written to them (recovery, repartitioning); JournalStore, the worker's
        // store on it.
        .target(
            name: "ChimeJournal",
            dependencies: ["ChimeCore", "ChimeStore", "ChimeSupport", "CCRC32C"],
            swiftSettings: swiftSettings
        ),
        // The only code that imports CMosquitto.
        .target(name: "ChimeMQTT", dependencies: ["CMosquitto"], swiftSettings: swiftSettings),
        // The only code that imports CMicroHTTPD: a small bounded HTTP/1.1 responder.
        .target(name: "ChimeHTTP", dependencies: ["CMicroHTTPD"], swiftSettings: swiftSettings),
        // The only code that imports CCrypto: the keys, signatures (ES256, RS256 JWTs) and Web Push
        // encryption (RFC 8291) that push delivery needs, every primitive libcrypto's.
        .target(name: "ChimeCrypto", dependencies: ["CCrypto"], swiftSettings: swiftSettings),
        // The only code that imports CCurl: an HTTPS client (HTTP/2 multiplexed) on a thread of its own,
        // for push services, with every connection's address checked against a policy.
        .target(name: "ChimeHTTPClient", dependencies: ["CCurl"], swiftSettings: swiftSettings),
        // The only code that imports CCrypt: making and checking password hashes.
        .target(name: "ChimePassword", dependencies: ["CCrypt"], swiftSettings: swiftSettings),
        // The web console (`chime console`): accounts, sessions, pages and routes, pure.
        .target(
            name: "ChimeConsole",
            dependencies: ["ChimeProtocol", "ChimeTime", "ChimePassword"],
            swiftSettings: swiftSettings
        ),
        // The only code that imports CPostgres: a connection, parameterised statements, transactions.
        .target(name: "ChimePostgres", dependencies: ["CPostgres"], swiftSettings: swiftSettings),
        // The journal in PostgreSQL: its schema and migrations, group commit, snapshots, slots, and the
        // worker's stores on it (PostgresStore, SlotWorkerStore). Only SQL through ChimePostgres; the
        // records and snapshots are ChimeStore's; ChimeJournal only to move a data directory in and out.
        .target(
            name: "ChimePostgresStore",
            dependencies: ["ChimeStore", "ChimePostgres", "ChimeJournal", "ChimeSupport"],
            swiftSettings: swiftSettings
        ),
        // glibc's malloc.h, for handing free memory back after recovery. Only ChimeSupport imports it.
        .systemLibrary(name: "CMalloc"),
        // What chimed and chime share: flags, usage errors, logging (ChimeLog, re-exported), signals,
        // durations, the version, the heap. No domain module.
        .target(
            name: "ChimeSupport",
            dependencies: ["ChimeJSON", "ChimeLog", "CMalloc"],
            swiftSettings: swiftSettings
        ),
        // Push delivery (APNs, FCM, Web Push): the credentials and their tokens, each delivery as
        // each platform takes it, what each answer means, and the attempts made off the loop.
        .target(
            name: "ChimePush",
            dependencies: ["ChimeCore", "ChimeCrypto", "ChimeHTTPClient", "ChimeSupport"],
            swiftSettings: swiftSettings
        ),
        // Wiring: configuration, services, the engine loop, signals; the store only through ChimeStore's seam.
        .target(
            name: "ChimeWorker",
            dependencies: ["ChimeCore", "ChimeStore", "ChimeMQTT", "ChimeHTTP", "ChimePush", "ChimeSupport"],
            swiftSettings: swiftSettings
        ),
        // The concrete store a worker's configuration names (the data directory or PostgreSQL), opened
        // for it: what chimed wires, and the tests that start a worker in process.
        .target(
            name: "ChimeWiring",
            dependencies: ["ChimeCore", "ChimeJournal", "ChimePostgresStore", "ChimeSupport", "ChimeWorker"],
            swiftSettings: swiftSettings
        ),
        // The `chime` command-line tool's commands, as a library the thin executable runs.
        .target(
            name: "ChimeCLI",
            dependencies: [
                "ChimeCore", "ChimeCrypto", "ChimeJournal", "ChimePostgresStore", "ChimeMQTT", "ChimeSupport",
                "ChimeConsole", "ChimePassword", "ChimeHTTP",
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "chimed",
            dependencies: ["ChimeCore", "ChimeWorker", "ChimeWiring", "ChimeSupport"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "chime", dependencies: ["ChimeCLI"], swiftSettings: swiftSettings),
        // The client library for apps and backends, shaped like UNUserNotificationCenter: its API,
        // the JSON mapping and the request/reply correlation, over a transport protocol. Pure (no
        // C MQTT), so an app can bring its own MQTT stack.
        .target(name: "ChimeClient", dependencies: ["ChimeProtocol", "ChimeTime"], swiftSettings: swiftSettings),
        // The client's transport over ChimeMQTT (libmosquitto).
        .target(name: "ChimeClientMQTT", dependencies: ["ChimeClient", "ChimeMQTT"], swiftSettings: swiftSettings),
        // What the benchmark and the tests share: a mosquitto on a free loopback port, child
        // processes, temporary directories, a seeded random generator, the hostile rules, the push stand-in.
        .target(name: "ChimeHarness", dependencies: ["ChimeMQTT", "ChimeProtocol"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "ChimeBench",
            dependencies: [
                "ChimeTime", "ChimeCore", "ChimeJournal", "ChimeMQTT", "ChimeHarness", "ChimeSupport", "ChimeWorker",
                "ChimeClientMQTT",
            ],
            swiftSettings: swiftSettings
        ),

        // Helpers only the tests use (the harness, re-exported, besides): a fault-injecting file
        // system, waiting for a condition, recording MQTT events, a chimed process, the engine driven
        // through the worker's loop on fakes (Harness), a chimed and its client on a real broker
        // (WorkerFixture).
        .target(
            name: "ChimeTestSupport",
            dependencies: [
                "ChimeCore", "ChimeHarness", "ChimeJournal", "ChimeMQTT", "ChimeStore", "ChimeSupport", "ChimeWorker",
            ],
            path: "Tests/ChimeTestSupport",
            swiftSettings: swiftSettings
        ),

        // One test target per module. A target that starts servers or processes (mosquitto, chimed,
        // PostgreSQL, nghttpd, ...) is an integration target, named `…IntegrationTests`: `make test`
        // runs the others as its unit phase and chooses its integration phases by target name.
        .testTarget(
            name: "ChimeTimeTests",
            dependencies: ["ChimeTime", "ChimeTestSupport"],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        // The wire protocol: JSON, topics, notification fields, replies, suggestions.
        .testTarget(
            name: "ChimeProtocolTests",
            dependencies: ["ChimeProtocol", "ChimeCore", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // The engine, mostly through the worker's loop on fakes (Harness): scheduling, edits, misfires,
        // badges, receipts, pushes, zones, find, snapshots.
        .testTarget(
            name: "ChimeEngineTests",
            dependencies: ["ChimeEngine", "ChimeCore", "ChimeMQTT", "ChimePush", "ChimeWorker", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // The worker's policy driven by hand: metrics, slots, routing, push dispatch.
        .testTarget(
            name: "ChimeWorkerPolicyTests",
            dependencies: ["ChimeWorkerPolicy", "ChimeCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ChimeJournalTests",
            dependencies: ["ChimeJournal", "ChimeTestSupport"],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        // ChimeHTTP's pure parts: the connection table, form bodies, the request rules.
        .testTarget(
            name: "ChimeHTTPTests",
            dependencies: ["ChimeHTTP", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // ChimeHTTP's server on loopback, fetched with curl (TLS with a CA made with openssl).
        .testTarget(
            name: "ChimeHTTPIntegrationTests",
            dependencies: ["ChimeHTTP", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // ChimeCrypto against the RFCs' examples and keys and signatures made with the openssl tool.
        .testTarget(
            name: "ChimeCryptoTests",
            dependencies: ["ChimeCrypto"],
            swiftSettings: swiftSettings
        ),
        // ChimePush's pure parts: the mapping per platform, the answers, the key files.
        .testTarget(
            name: "ChimePushTests",
            dependencies: ["ChimePush", "ChimeCore", "ChimeHTTPClient", "ChimeSupport", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // ChimeHTTPClient against real servers on loopback: nghttpd (HTTP/2), openssl s_server (HTTP/1),
        // and sockets that never answer.
        .testTarget(
            name: "ChimeHTTPClientIntegrationTests",
            dependencies: ["ChimeHTTPClient", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // ChimeHTTPClient's address policy, pure.
        .testTarget(name: "ChimeHTTPClientTests", dependencies: ["ChimeHTTPClient"], swiftSettings: swiftSettings),
        // ChimeMQTT's pure parts: connection options, topic filters, error codes.
        .testTarget(name: "ChimeMQTTTests", dependencies: ["ChimeMQTT"], swiftSettings: swiftSettings),
        // ChimeMQTT against a real mosquitto.
        .testTarget(
            name: "ChimeMQTTIntegrationTests",
            dependencies: ["ChimeMQTT", "ChimeHarness", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // The worker without a broker: its loop on fakes, what it reads back, the fuzzers' findings.
        .testTarget(
            name: "ChimeWorkerTests",
            dependencies: [
                "ChimeWorker", "ChimeCore", "ChimeJournal", "ChimeMQTT", "ChimeSupport", "ChimeTestSupport",
            ],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        // The built chimed on a real mosquitto: end to end, durability, hostile inputs, metrics, slots.
        .testTarget(
            name: "ChimeWorkerIntegrationTests",
            dependencies: [
                "ChimeWorker", "ChimeWiring", "ChimeCore", "ChimeMQTT", "ChimeJournal", "ChimePostgres", "ChimeSupport",
                "ChimeHTTP", "ChimeTestSupport",
            ],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        // chimed pushing to the push services' stand-in (Tests/PushStandin).
        .testTarget(
            name: "ChimeWorkerPushIntegrationTests",
            dependencies: ["ChimeWorker", "ChimeCore", "ChimeMQTT", "ChimeSupport", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // Two chimeds on a Patroni cluster (etcd, two PostgreSQL nodes) through a switchover and a kill -9.
        .testTarget(
            name: "ChimeWorkerPatroniIntegrationTests",
            dependencies: [
                "ChimeWorker", "ChimeCore", "ChimeMQTT", "ChimePostgres", "ChimeSupport", "ChimeTestSupport",
            ],
            swiftSettings: swiftSettings
        ),
        // The five uses Chime was made for, end to end, by a phone with receipts.
        .testTarget(
            name: "ChimeWorkerScenarioIntegrationTests",
            dependencies: ["ChimeWorker", "ChimeCore", "ChimeMQTT", "ChimeSupport", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // The built `chime` binary run as a person would, against a real broker and chimed.
        .testTarget(
            name: "ChimeCLIIntegrationTests",
            dependencies: [
                "ChimeCLI", "ChimeCore", "ChimeCrypto", "ChimeJournal", "ChimeMQTT", "ChimeSupport", "ChimeTestSupport",
            ],
            swiftSettings: swiftSettings
        ),
        // The client library: its JSON mapping, and every call against a real broker and chimed.
        .testTarget(
            name: "ChimeClientIntegrationTests",
            dependencies: ["ChimeClient", "ChimeClientMQTT", "ChimeCore", "ChimeHarness", "ChimeMQTT"],
            swiftSettings: swiftSettings
        ),
        // ChimePostgres against a real PostgreSQL (TestPostgres).
        .testTarget(
            name: "ChimePostgresIntegrationTests",
            dependencies: ["ChimePostgres", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // The journal in PostgreSQL against a real server.
        .testTarget(
            name: "ChimePostgresStoreIntegrationTests",
            dependencies: ["ChimePostgresStore", "ChimePostgres", "ChimeJournal", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // The console's pure parts: password hashes, accounts, sessions, pages, routes.
        .testTarget(
            name: "ChimeConsoleTests",
            dependencies: ["ChimeConsole", "ChimePassword", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // deploy/ as shipped: broker configs and ACLs, partitioned workers.
        .testTarget(
            name: "ChimeDeployIntegrationTests",
            dependencies: [
                "ChimeCLI", "ChimeCore", "ChimeCrypto", "ChimeJournal", "ChimeMQTT", "ChimeSupport", "ChimeWorker",
                "ChimeTestSupport",
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
