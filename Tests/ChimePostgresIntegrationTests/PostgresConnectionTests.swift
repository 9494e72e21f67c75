import ChimePostgres
import ChimeTestSupport
import Foundation
import Testing

/// ChimePostgres against a real PostgreSQL: each test starts its own server (TestPostgres).
@Suite("PostgresConnection against a real PostgreSQL")
struct PostgresConnectionTests {
    @Test("connects, reports its status and server, runs a statement, and closes")
    func connect() async throws {
        let server = try await TestPostgres.start()
        let connection = try PostgresConnection(server.uri)
        #expect(connection.status == .ok)
        #expect(connection.transactionStatus == .idle)
        #expect(connection.serverVersion >= 150000)
        #expect(connection.host == server.host)
        #expect(connection.port == server.port)
        #expect(connection.parameterStatus("server_encoding") == "UTF8")
        #expect(connection.parameterStatus("application_name") == "chime")

        let result = try connection.execute("SELECT 1 AS one, 'two' AS two, NULL::text AS three")
        #expect(result.columns == ["one", "two", "three"])
        #expect(result.rows == [PostgresRow([.text("1"), .text("two"), nil])])
        #expect(result.commandStatus == "SELECT 1")
        #expect(result.affectedRows == 1)

        connection.close()
        #expect(connection.status == .closed)
        #expect(throws: PostgresError(.closed)) { try connection.execute("SELECT 1") }
        connection.close()
        await server.stop()
    }

    @Test("text and bytea go as parameters and come back exactly: NULs, empty, Unicode, NULL, 16 MiB")
    func parameters() async throws {
        let server = try await TestPostgres.start()
        let connection = try PostgresConnection(server.uri)
        try connection.execute("CREATE TABLE notes (id bigint PRIMARY KEY, name text, body bytea)")

        var generator = SplitMix64(seed: 15)
        let large = (0..<(16 << 20)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        let rows: [(Int64, String?, [UInt8]?)] = [
            (1, "plain", [0, 1, 0, 255, 0]),
            (2, "Grüße 🕰 \u{7F}\t\n", []),
            (3, nil, nil),
            (4, "", [0]),
            (5, "large", large),
            (-9_223_372_036_854_775_808, "min", [92, 120, 48, 48]),  // the bytes of "\x00", not an escape
        ]
        for (id, name, body) in rows {
            let inserted = try connection.execute(
                "INSERT INTO notes (id, name, body) VALUES ($1, $2, $3)",
                [.integer(id), name.map { .text($0) }, body.map { .bytea($0) }]
            )
            #expect(inserted.affectedRows == 1)
            #expect(inserted.commandStatus == "INSERT 0 1")
        }

        let read = try connection.execute(
            "SELECT id, name, body FROM notes WHERE id > $1 ORDER BY id",
            [.integer(Int64.min)]
        )
        #expect(read.rows.count == rows.count - 1)
        for (row, expected) in zip(read.rows, rows.dropLast()) {
            #expect(try row.int64(0) == expected.0)
            #expect(row[1] == expected.1.map { .text($0) })
            #expect(row[2] == expected.2.map { .bytea($0) })
        }
        let minimum = try #require(
            try connection.execute("SELECT body, length(body) FROM notes WHERE id = $1", [.integer(Int64.min)]).rows
                .first
        )
        #expect(try minimum.bytes(0) == [92, 120, 48, 48])
        #expect(try minimum.int64(1) == 4)
        let length = try connection.execute("SELECT length(body) FROM notes WHERE name = $1", ["large"])
        #expect(try length.rows.first?.int64(0) == Int64(large.count))
    }

    @Test("integers, booleans, jsonb and void are decoded; a type it does not decode is refused with a hint")
    func types() async throws {
        let server = try await TestPostgres.start()
        let connection = try PostgresConnection(server.uri)
        let row = try #require(
            try connection.execute(
                "SELECT $1::smallint, $2::int, $3::bigint, true, false, 'x'::name, '{\"a\": 1}'::jsonb, 42::oid, "
                    + "pg_sleep(0)",
                ["-32768", "-2147483648", "9223372036854775807"]
            ).rows.first
        )
        #expect(
            row.values == [
                "-32768", "-2147483648", "9223372036854775807", "t", "f", "x", "{\"a\": 1}", "42", "",
            ]
        )
        #expect(throws: PostgresError(.unexpectedResult)) { try row.bytes(0) }
        #expect(throws: PostgresError(.unexpectedResult)) { try row.int64(5) }
        #expect(throws: PostgresError(.unexpectedResult)) { try row.text(99) }

        let error = #expect(throws: PostgresError(.unexpectedResult)) {
            try connection.execute("SELECT now() AS at")
        }
        #expect(error?.message.contains("at::text") == true)
        #expect(error?.isConnectionUsable == true)
        let text = try connection.execute("SELECT now()::text AS at")
        #expect(try text.rows.first?.text(0).isEmpty == false)
    }

    @Test(
        "the server's errors carry their SQLSTATE and leave the connection usable",
        arguments: [
            ("INSERT INTO notes (id) VALUES (1)", SQLState.uniqueViolation),
            ("SELECT * FROM no_such_table", SQLState.undefinedTable),
            ("SELEC 1", SQLState.syntaxError),
        ]
    )
    func sqlState(statement: String, sqlState: String) async throws {
        let server = try await TestPostgres.start()
        let connection = try PostgresConnection(server.uri)
        try connection.execute("CREATE TABLE notes (id bigint PRIMARY KEY)")
        try connection.execute("INSERT INTO notes (id) VALUES (1)")

        let error = #expect(throws: PostgresError(.queryFailed)) { try connection.execute(statement) }
        #expect(error?.sqlState == sqlState)
        #expect(error?.isConnectionUsable == true)
        #expect(error?.message.isEmpty == false)
        if sqlState == SQLState.uniqueViolation {
            #expect(error?.detail?.contains("(id)=(1)") == true)
        }
        #expect(connection.status == .ok)
        #expect(try connection.execute("SELECT count(*) FROM notes").rows.first?.int64(0) == 1)
    }

    @Test("a rolled-back transaction leaves nothing; a committed one is seen by another connection")
    func transactions() async throws {
        let server = try await TestPostgres.start()
        let connection = try PostgresConnection(server.uri)
        let other = try PostgresConnection(server.uri)
        try connection.execute("CREATE TABLE notes (id bigint PRIMARY KEY)")
        func count() throws -> Int64? {
            try other.execute("SELECT count(*) FROM notes").rows.first?.int64(0)
        }

        // Thrown out of the body: rolled back.
        #expect(throws: PostgresError(.invalidParameter)) {
            try connection.transaction { connection throws(PostgresError) in
                try connection.execute("INSERT INTO notes (id) VALUES (1), (2)")
                #expect(connection.transactionStatus == .inTransaction)
                throw PostgresError(.invalidParameter, "the caller changed its mind")
            }
        }
        #expect(connection.transactionStatus == .idle)
        #expect(try count() == 0)

        // By hand.
        try connection.begin()
        try connection.execute("INSERT INTO notes (id) VALUES (3)")
        try connection.rollback()
        #expect(try count() == 0)

        // A statement failed and the caller went on to COMMIT: the server rolls back, and says so.
        try connection.begin()
        try connection.execute("INSERT INTO notes (id) VALUES (4)")
        #expect(throws: PostgresError(.queryFailed)) { try connection.execute("INSERT INTO notes (id) VALUES (4)") }
        #expect(connection.transactionStatus == .inFailedTransaction)
        let next = #expect(throws: PostgresError(.queryFailed)) { try connection.execute("SELECT 1") }
        #expect(next?.sqlState == SQLState.inFailedTransaction)
        #expect(throws: PostgresError(.queryFailed)) { try connection.commit() }
        #expect(connection.transactionStatus == .idle)
        #expect(try count() == 0)

        // Committed: visible to the other connection, and the body's value comes back.
        let value = try connection.transaction { connection throws(PostgresError) in
            try connection.execute("INSERT INTO notes (id) VALUES (5), (6), (7)").affectedRows
        }
        #expect(value == 3)
        #expect(try count() == 3)
    }

    @Test("a bad URI or a refused port fails with connectionFailed at once")
    func connectionFailed() async throws {
        let refused = try TestBroker.freePort()
        let strings = [
            "postgresql://postgres@127.0.0.1:\(refused)/postgres",
            "postgresql://[::1",
            "postgresql://postgres@127.0.0.1:\(refused)/postgres?no_such_option=1",
            "host=127.0.0.1 port=\(refused) sslmode=nonsense",
            "this is not a connection string",
        ]
        for string in strings {
            let started = ContinuousClock.now
            let error = #expect(throws: PostgresError(.connectionFailed)) { try PostgresConnection(string) }
            #expect(error?.isConnectionUsable == false)
            #expect(error?.message.isEmpty == false)
            #expect(ContinuousClock.now - started < .seconds(2), "\(string)")
        }
    }

    @Test("a server that does not answer: connecting gives up after the connect timeout")
    func connectTimeout() async throws {
        let server = try await TestPostgres.start()
        _ = try PostgresConnection(server.uri)  // positive control
        server.pause()
        let started = ContinuousClock.now
        let error = #expect(throws: PostgresError(.connectionFailed)) {
            try PostgresConnection(server.uri, connectTimeout: .seconds(2))
        }
        let waited = ContinuousClock.now - started
        server.resume()
        #expect(error?.message.contains("timeout") == true)
        #expect(waited >= .seconds(1) && waited < .seconds(10))
        _ = try PostgresConnection(server.uri)
    }

    @Test("a statement the server does not answer times out, and the connection is dropped")
    func statementTimeout() async throws {
        let server = try await TestPostgres.start()
        let connection = try PostgresConnection(server.uri, statementTimeout: .milliseconds(500))
        #expect(try connection.execute("SELECT 1").rows.count == 1)  // positive control
        server.pause()
        let error = #expect(throws: PostgresError(.timeout)) { try connection.execute("SELECT 1") }
        server.resume()
        #expect(error?.isConnectionUsable == false)
        #expect(connection.status == .bad)
        #expect(throws: PostgresError(.connectionLost)) { try connection.execute("SELECT 1") }
        #expect(try PostgresConnection(server.uri).execute("SELECT 1").rows.count == 1)
    }

    @Test("a server killed mid-session: the next statement fails with the connection unusable")
    func serverKilled() async throws {
        let server = try await TestPostgres.start()
        let connection = try PostgresConnection(server.uri)
        try connection.execute("CREATE TABLE notes (id bigint PRIMARY KEY)")
        try connection.begin()
        try connection.execute("INSERT INTO notes (id) VALUES (1)")
        await server.kill()

        let error = #expect(throws: PostgresError(.connectionLost)) {
            try connection.execute("INSERT INTO notes (id) VALUES (2)")
        }
        #expect(error?.isConnectionUsable == false)
        #expect(connection.status == .bad)
        #expect(connection.transactionStatus == .unknown)
        let again = #expect(throws: PostgresError(.connectionLost)) { try connection.commit() }
        #expect(again?.isConnectionUsable == false)

        // After crash recovery the uncommitted insert is gone.
        try await server.restart()
        let fresh = try PostgresConnection(server.uri)
        #expect(try fresh.execute("SELECT count(*) FROM notes").rows.first?.int64(0) == 0)
    }

    @Test("a multi-host URI skips a host that is down, and target_session_attrs is honoured")
    func multiHost() async throws {
        let server = try await TestPostgres.start()
        let down = try TestBroker.freePort()
        let hosts = "postgresql://postgres@127.0.0.1:\(down),127.0.0.1:\(server.port)/postgres"
        let connection = try PostgresConnection(hosts + "?target_session_attrs=read-write")
        #expect(connection.port == server.port)
        #expect(try connection.execute("SHOW transaction_read_only").rows.first?.text(0) == "off")

        let error = #expect(throws: PostgresError(.connectionFailed)) {
            try PostgresConnection(hosts + "?target_session_attrs=standby")
        }
        #expect(error?.message.contains("standby") == true)
    }

    @Test("parameters that look like SQL are stored as data, and text with NUL is refused before sending")
    func injection() async throws {
        let server = try await TestPostgres.start()
        let connection = try PostgresConnection(server.uri)
        try connection.execute("CREATE TABLE notes (id bigint PRIMARY KEY, name text, body bytea)")
        let hostile = [
            "'); DROP TABLE notes; --",
            "Robert'); DROP TABLE Students;--",
            "$1",
            "\\x00",
            "' OR '1'='1",
            "E'\\\\'; SELECT pg_sleep(10); --",
            "\"quoted\"; COMMIT; BEGIN",
        ]
        for (index, text) in hostile.enumerated() {
            try connection.execute(
                "INSERT INTO notes (id, name, body) VALUES ($1, $2, $3)",
                [.integer(index), .text(text), .bytea(Array(text.utf8))]
            )
        }
        let rows = try connection.execute("SELECT name, body FROM notes ORDER BY id").rows
        #expect(try rows.map { try $0.text(0) } == hostile)
        #expect(try rows.map { try $0.bytes(1) } == hostile.map { Array($0.utf8) })
        let matched = try connection.execute("SELECT count(*) FROM notes WHERE name = $1", ["' OR '1'='1"])
        #expect(try matched.rows.first?.int64(0) == 1)

        let error = #expect(throws: PostgresError(.invalidParameter)) {
            try connection.execute("INSERT INTO notes (id, name) VALUES ($1, $2)", [99, .text("a\u{0}b")])
        }
        #expect(error?.isConnectionUsable == true)
        #expect(try connection.execute("SELECT count(*) FROM notes").rows.first?.int64(0) == Int64(hostile.count))
    }
}
