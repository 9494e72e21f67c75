import ChimeClient

extension NotificationContent {
    /// Content with every field set (`alertBodies` instead of `body` is the one left out).
    static let everyField = NotificationContent(
        title: "Medicine",
        body: "Take your pill",
        action: "Open",
        hasAction: true,
        sound: "default",
        category: "med",
        badge: .increment(1),
        userInfo: ["kind": "med", "dose": 2],
        expiresAfter: 3600,
        misfire: .skip,
        ignoreQuietHours: true,
        enabled: false,
        keepAfterFiring: true
    )
}
