import Glibc
import Testing

@testable import ChimeMQTT

@Suite("MQTTError")
struct MQTTErrorTests {
    @Test("codes carry their C names and libmosquitto's text")
    func codes() {
        #expect(MQTTError.Code.noConnection.rawValue == 4)
        #expect(MQTTError.Code.noConnection.cName == "MOSQ_ERR_NO_CONN")
        #expect(MQTTError.Code.timeout.cName == "MOSQ_ERR_TIMEOUT")
        #expect(MQTTError.Code.system.cName == "MOSQ_ERR_ERRNO")
        #expect(MQTTError.Code.noSubscribers.rawValue == -3)
        #expect(MQTTError.Code(rawValue: 999).cName == "MOSQ_ERR(999)")
        #expect(MQTTError.Code.noConnection.text == "The client is not currently connected.")
    }

    @Test("the checker passes success and maps failures")
    func checker() throws {
        try MQTTError.check(0, "mosquitto_publish_v5")

        let noConnection = #expect(throws: MQTTError(.noConnection)) {
            try MQTTError.check(4, "mosquitto_publish_v5")
        }
        #expect(noConnection?.function == "mosquitto_publish_v5")
        #expect(noConnection?.systemErrno == nil)
        #expect(
            noConnection?.description
                == "mosquitto_publish_v5: The client is not currently connected. (MOSQ_ERR_NO_CONN)"
        )

    }

    @Test("MOSQ_ERR_ERRNO and MOSQ_ERR_EAI carry errno and its text")
    func systemErrors() {
        let refused = MQTTError(result: 14, systemErrno: ECONNREFUSED, function: "mosquitto_reconnect")
        #expect(refused == MQTTError(.system))
        #expect(refused.systemErrno == ECONNREFUSED)
        #expect(refused.message == "Connection refused")
        #expect(refused.description == "mosquitto_reconnect: Connection refused (MOSQ_ERR_ERRNO)")

        let lookup = MQTTError(result: 15, systemErrno: EAI_NONAME, function: "mosquitto_connect_bind_v5")
        #expect(lookup == MQTTError(.hostLookup))
        #expect(lookup.systemErrno == EAI_NONAME)
        #expect(lookup.message.hasPrefix("cannot resolve the host name: "))

        let other = MQTTError(result: 9, systemErrno: EINVAL, function: "mosquitto_publish_v5")
        #expect(other == MQTTError(.payloadSize))
        #expect(other.systemErrno == nil)
    }

    @Test("equality and hashing look at the code only")
    func equality() {
        let a = MQTTError(.timeout, "one", function: "f")
        let b = MQTTError(.timeout, "two")
        #expect(a == b)
        #expect(Set([a, b]).count == 1)
        #expect(a != MQTTError(.noConnection))
    }
}
