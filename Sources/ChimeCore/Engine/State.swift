/// A notification the engine holds: what was scheduled, and how far its series has got.
///
/// The first group of properties is durable (journal and snapshots carry it); the second is
/// derived from it and rebuilt after recovery.
struct StoredNotification: Sendable {
    /// Resolved: `id` and `fireDate` are set, `after` and `alignTo` are nil.
    var spec: NotificationSpec
    /// Changes each time the id is scheduled, so that the acknowledgement of a delivery of an
    /// earlier version does not advance the new one.
    var version: UInt64
    var enabled: Bool
    var firedCount: Int
    var lastFiredAt: Instant?
    var createdAt: Instant
    var updatedAt: Instant
    /// Occurrences at or after this instant are still to be delivered. Set to the time of
    /// scheduling (or resuming) plus the lead time, and past each acknowledged occurrence.
    var pendingFrom: Instant
    /// A one-shot that fired, or a series that ended, kept (paused) by `keepAfterFiring`.
    var done: Bool
    /// For `{id}~snooze`: the id it snoozes.
    var snoozeOf: String?

    // Derived.
    var recurrence: Recurrence?
    /// The next occurrence to deliver that is not already in flight.
    var next: Occurrence?
    var generation: UInt64 = 0
    /// Held by the device's quiet hours; delivered with `deferred: true` when they end.
    var deferred = false
    /// The latest occurrence published in this run, so that re-arming never sends it twice.
    var sentThrough: Instant?

    var id: String { spec.id ?? "" }
    var leadTime: Int64 { spec.leadTime ?? 0 }
    var isListed: Bool { snoozeOf == nil }

    /// When an occurrence is due: the occurrence minus the lead time.
    func fireTime(_ occurrence: Occurrence) -> Instant { occurrence.instant.adding(milliseconds: -leadTime) }

    var nextFireDate: Instant? { enabled && !done ? next.map(fireTime) : nil }
}

struct DeviceState: Sendable {
    var timeZone: Zone?
    /// The badge counter as acknowledged deliveries and `device` commands left it.
    var badge = 0
    var quietHours: QuietHours?
    var notifications: [String: StoredNotification] = [:]
    /// How many listed (non-snooze) notifications the device holds, for the quota.
    var listedCount = 0
    /// Badge changes of deliveries sent and not yet acknowledged, oldest first.
    var inflightBadges: [(token: UInt64, badge: Badge)] = []

    /// The counter as the device has been told: acknowledged changes, then those in flight.
    var currentBadge: Int {
        inflightBadges.reduce(badge) { $1.badge.applied(to: $0) }
    }

    var isEmpty: Bool {
        notifications.isEmpty && timeZone == nil && badge == 0 && quietHours == nil && inflightBadges.isEmpty
    }
}

/// A delivery published and not yet acknowledged.
struct InFlight: Sendable {
    var deviceId: String
    var id: String
    var version: UInt64
    var occurrence: Occurrence
    var firedAt: Instant
    var last: Bool
    var badge: Badge?
}
