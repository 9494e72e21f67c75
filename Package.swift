// swift-tools-version:6.0
import PackageDescription

/// One list of settings for every target, so the whole package compiles the same way. Warnings
/// are errors: the build stays warning-free.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .unsafeFlags(["-warnings-as-errors"]),
]

let package = Package(
    name: "Chime",
    platforms: [.macOS(.v15)],
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
        // Pure calendar arithmetic: instants, civil times, zones, ISO 8601, RRULE. Foundation only.
        .target(name: "ChimeTime", swiftSettings: swiftSettings),
        // Pure core: JSON, protocol codec, model, engine state machine. Foundation only.
        .target(
            name: "ChimeCore",
            dependencies: ["ChimeTime"],
            // Release builds drop the run-time exclusivity checks of the engine's classes (the
            // compiler's static ones stay, and debug builds, which the tests run, keep both): they
            // were 15 % of restoring a snapshot (docs/bench/scale.md).
            swiftSettings: swiftSettings + [
                .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))
            ]
        ),
        // CRC-32C with the processor's instruction, which Swift cannot name. Only ChimeJournal imports it.
        .target(name: "CCRC32C"),
        // The only code that touches the data directory: the journal, snapshots, and the engine's
        // state read from and written to them (recovery, repartitioning).
        .target(name: "ChimeJournal", dependencies: ["ChimeCore", "CCRC32C"], swiftSettings: swiftSettings),
        // The only code that imports CMosquitto.
        .target(name: "ChimeMQTT", dependencies: ["CMosquitto"], swiftSettings: swiftSettings),
        // The only code that imports CMicroHTTPD: a small bounded HTTP/1.1 responder.
        .target(name: "ChimeHTTP", dependencies: ["CMicroHTTPD"], swiftSettings: swiftSettings),
        // The only code that imports CPostgres: a connection, parameterised statements, transactions.
        .target(name: "ChimePostgres", dependencies: ["CPostgres"], swiftSettings: swiftSettings),
        // The journal in PostgreSQL: its schema and migrations, group commit, snapshots. Only SQL
        // through ChimePostgres; the records and snapshots are ChimeJournal's.
        .target(
            name: "ChimePostgresStore",
            dependencies: ["ChimePostgres", "ChimeJournal"],
            swiftSettings: swiftSettings
        ),
        // glibc's malloc.h, for handing free memory back after recovery. Only ChimeSupport imports it.
        .systemLibrary(name: "CMalloc"),
        // What chimed and chime share: flags, usage errors, logging, signals, clocks, the version,
        // the heap.
        .target(name: "ChimeSupport", dependencies: ["ChimeCore", "CMalloc"], swiftSettings: swiftSettings),
        // Wiring: configuration, services, the engine loop, signals.
        .target(
            name: "ChimeWorker",
            dependencies: [
                "ChimeCore", "ChimeJournal", "ChimePostgresStore", "ChimeMQTT", "ChimeHTTP", "ChimeSupport",
            ],
            swiftSettings: swiftSettings
        ),
        // The `chime` command-line tool's commands, as a library the thin executable runs.
        .target(
            name: "ChimeCLI",
            dependencies: ["ChimeCore", "ChimeJournal", "ChimePostgresStore", "ChimeMQTT", "ChimeSupport"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "chimed",
            dependencies: ["ChimeCore", "ChimeWorker", "ChimeSupport"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "chime", dependencies: ["ChimeCLI"], swiftSettings: swiftSettings),
        // The client library for apps and backends, shaped like UNUserNotificationCenter: its API,
        // the JSON mapping and the request/reply correlation, over a transport protocol. Pure (no
        // C MQTT), so an app can bring its own MQTT stack.
        .target(name: "ChimeClient", dependencies: ["ChimeCore", "ChimeTime"], swiftSettings: swiftSettings),
        // The client's transport over ChimeMQTT (libmosquitto).
        .target(name: "ChimeClientMQTT", dependencies: ["ChimeClient", "ChimeMQTT"], swiftSettings: swiftSettings),
        // What the benchmark and the tests share: a mosquitto on a free loopback port, child
        // processes, temporary directories, a seeded random generator, the hostile rules.
        .target(name: "ChimeHarness", dependencies: ["ChimeMQTT"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "ChimeBench",
            dependencies: [
                "ChimeTime", "ChimeCore", "ChimeJournal", "ChimeMQTT", "ChimeHarness", "ChimeSupport", "ChimeWorker",
            ],
            swiftSettings: swiftSettings
        ),

        // Helpers only the tests use (the harness, re-exported, besides): a fault-injecting file
        // system, waiting for a condition, recording MQTT events, a chimed process.
        .target(
            name: "ChimeTestSupport",
            dependencies: ["ChimeCore", "ChimeHarness", "ChimeJournal", "ChimeMQTT", "ChimeSupport", "ChimeWorker"],
            path: "Tests/ChimeTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ChimeTimeTests",
            dependencies: ["ChimeTime", "ChimeTestSupport"],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ChimeCoreTests",
            dependencies: ["ChimeCore", "ChimeMQTT", "ChimeWorker", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ChimeJournalTests",
            dependencies: ["ChimeJournal", "ChimeTestSupport"],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ChimeHTTPTests",
            dependencies: ["ChimeHTTP", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ChimeMQTTTests",
            dependencies: ["ChimeMQTT", "ChimeHarness", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ChimeWorkerTests",
            dependencies: [
                "ChimeWorker", "ChimeCore", "ChimeMQTT", "ChimeJournal", "ChimePostgres", "ChimeSupport", "ChimeHTTP",
                "ChimeTestSupport",
            ],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        // The built `chime` binary run as a person would, against a real broker and chimed.
        .testTarget(
            name: "ChimeCLITests",
            dependencies: ["ChimeCLI", "ChimeCore", "ChimeJournal", "ChimeMQTT", "ChimeSupport", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // The client library: its JSON mapping, and every call against a real broker and chimed.
        .testTarget(
            name: "ChimeClientTests",
            dependencies: ["ChimeClient", "ChimeClientMQTT", "ChimeCore", "ChimeHarness", "ChimeMQTT"],
            swiftSettings: swiftSettings
        ),
        // ChimePostgres against a real PostgreSQL (TestPostgres).
        .testTarget(
            name: "ChimePostgresTests",
            dependencies: ["ChimePostgres", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // The journal in PostgreSQL against a real server.
        .testTarget(
            name: "ChimePostgresStoreTests",
            dependencies: ["ChimePostgresStore", "ChimePostgres", "ChimeJournal", "ChimeTestSupport"],
            swiftSettings: swiftSettings
        ),
        // deploy/ as shipped: broker configs and ACLs, partitioned workers.
        .testTarget(
            name: "ChimeDeployTests",
            dependencies: [
                "ChimeCore", "ChimeJournal", "ChimeMQTT", "ChimeSupport", "ChimeWorker", "ChimeTestSupport",
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
