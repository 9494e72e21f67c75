import ChimeConsole
import ChimeProtocol
import ChimeTime
import Testing

@Suite struct AuditEntryTests {
    @Test func writesOneJSONObjectWithEveryKey() {
        let entry = AuditEntry(
            who: "alice",
            role: .operator,
            address: "10.0.0.1",
            action: ConsoleAction.cancel.rawValue,
            device: "phone-1",
            ids: ["n1", "n2"],
            outcome: .ok,
            at: Instant(milliseconds: 1_796_119_200_123)
        )
        #expect(
            entry.line
                == #"{"at":"2026-12-01T10:00:00.123Z","who":"alice","role":"operator","address":"10.0.0.1","#
                + #""action":"cancel","device":"phone-1","ids":["n1","n2"],"outcome":"ok","detail":null}"#
        )
        let refused = AuditEntry(
            who: "mallory",
            role: nil,
            address: "::1",
            action: "login",
            outcome: .refused,
            detail: "wrong name or password",
            at: Instant(seconds: 0)
        )
        #expect(
            refused.line
                == #"{"at":"1970-01-01T00:00:00.000Z","who":"mallory","role":null,"address":"::1","action":"login","#
                + #""device":null,"ids":[],"outcome":"refused","detail":"wrong name or password"}"#
        )
    }

    @Test func escapesWhatCouldBreakALineOrForgeAnEntry() throws {
        let hostile = "x\"}\n{\"who\":\"root\",\u{0}\u{1B}[31m\\\r\u{2028}"
        let entry = AuditEntry(
            who: hostile,
            role: .viewer,
            address: hostile,
            action: hostile,
            device: hostile,
            ids: [hostile, ""],
            outcome: .failed,
            detail: hostile,
            at: Instant(seconds: 1)
        )
        let line = entry.line
        #expect(!line.contains("\n") && !line.contains("\r") && !line.utf8.contains(0) && !line.utf8.contains(0x1B))
        guard case .object(let object) = try JSON(parsing: line) else {
            Issue.record("not an object: \(line)")
            return
        }
        #expect(object.keys == ["at", "who", "role", "address", "action", "device", "ids", "outcome", "detail"])
        for key in ["who", "address", "action", "device", "detail"] {
            #expect(object[key] == .string(hostile))
        }
        #expect(object["ids"] == .array([.string(hostile), .string("")]))
        #expect(object["outcome"] == .string("failed"))
    }
}
