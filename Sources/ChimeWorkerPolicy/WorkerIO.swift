import ChimeEngine
import ChimeProtocol

/// Why the worker stopped abnormally: reported in one line, exit status 1.
public struct WorkerError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A store operation that failed (a journal write, a sync, a snapshot), as the worker's policy
/// sees it: the message goes to the log and into the reply of a refused command.
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String
    /// The store may take writes again, and what a failed commit did is unknown: a database whose
    /// connection broke. False: what is on disk may not read as it stands (a failed fsync), and
    /// only recovery knows.
    public var transient: Bool
    public init(_ message: String, transient: Bool = false) {
        self.message = message
        self.transient = transient
    }
    public var description: String { message }
}

/// A publication or subscription the transport could not take (not connected, too large, ...).
public struct TransportError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A message the transport received, as the worker's policy sees it.
public struct InboundMessage: Hashable, Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: Int
    /// The MQTT packet identifier (0 for QoS 0): a redelivery by the broker keeps it.
    public var messageId: Int32
    /// MQTT 5 Response Topic and Correlation Data.
    public var responseTopic: String?
    public var correlationData: [UInt8]?
    /// The command, decoded already off the loop's turn (``WorkerStateMachine/predecodable(_:now:)``):
    /// the machine uses it instead of decoding the payload itself.
    public var decoded: PredecodedCommand?

    public init(
        topic: String,
        payload: [UInt8],
        qos: Int = 1,
        messageId: Int32 = 0,
        responseTopic: String? = nil,
        correlationData: [UInt8]? = nil
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.messageId = messageId
        self.responseTopic = responseTopic
        self.correlationData = correlationData
    }
}

/// A command decoded before the machine handles it, and the time its decoding took: the device
/// pays for that time as for the machine's own.
public struct PredecodedCommand: Hashable, Sendable {
    public var deviceId: String
    public var op: Operation
    public var outcome: Result<Request, CommandDecoder.Failure>
    public var milliseconds: Double

    public init(deviceId: String, op: Operation, outcome: Result<Request, CommandDecoder.Failure>, milliseconds: Double)
    {
        self.deviceId = deviceId
        self.op = op
        self.outcome = outcome
        self.milliseconds = milliseconds
    }
}

/// A message the worker's policy wants published.
public struct OutboundMessage: Hashable, Sendable {
    /// What the message is: the policy is told how its publication went, by purpose.
    public enum Purpose: Hashable, Sendable {
        case reply
        /// A notification's delivery, which stays in flight until the broker acknowledges it.
        /// `lateness`: whose doing it is if it is late (the engine decides, ``Lateness``).
        /// `slot`: the slot of its device in slot mode, else 0.
        case delivery(token: UInt64, fireId: String, due: Instant, lateness: Lateness = .worker, slot: Int = 0)
        /// The retained `online` status, published once commands can reach the worker.
        case onlineStatus
        case offlineStatus
        case stats
        /// Routing by slot: a command forwarded to the owner of its slot (QoS 0).
        case forward
        /// Routing by slot: on each connection, one QoS 1 publication to `P/$slot/check`, which no
        /// one subscribes to, so that the broker's PUBACK says whether its ACL lets this worker
        /// forward (QoS 0 forwards are refused silently).
        case forwardCheck
    }

    public struct Property: Hashable, Sendable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public var topic: String
    public var payload: [UInt8]
    public var qos: Int
    public var retain: Bool
    public var purpose: Purpose
    public var contentType: String?
    /// MQTT 5 Response Topic: a forwarded command keeps its sender's.
    public var responseTopic: String?
    public var correlationData: [UInt8]?
    public var userProperties: [Property]
    public var messageExpiry: UInt32?

    public init(
        topic: String,
        payload: [UInt8],
        qos: Int,
        retain: Bool = false,
        purpose: Purpose,
        contentType: String? = nil,
        responseTopic: String? = nil,
        correlationData: [UInt8]? = nil,
        userProperties: [Property] = [],
        messageExpiry: UInt32? = nil
    ) {
        self.responseTopic = responseTopic
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.purpose = purpose
        self.contentType = contentType
        self.correlationData = correlationData
        self.userProperties = userProperties
        self.messageExpiry = messageExpiry
    }
}

/// What the store tells the policy after a commit: whether a snapshot is due, and its size
/// for stats.
public struct StoreStatus: Hashable, Sendable {
    /// Enough was written since the last snapshot to take the next one.
    public var snapshotDue: Bool
    public var bytesSinceSnapshot: Int
    public var lastSequence: UInt64
    /// Slot mode: the slot whose journal the next snapshot compacts (the one that grew most).
    public var snapshotSlot: Int

    public init(snapshotDue: Bool = false, bytesSinceSnapshot: Int = 0, lastSequence: UInt64 = 0, snapshotSlot: Int = 0)
    {
        self.snapshotDue = snapshotDue
        self.bytesSinceSnapshot = bytesSinceSnapshot
        self.lastSequence = lastSequence
        self.snapshotSlot = snapshotSlot
    }
}
