import ChimeProtocol

/// Editing one notification's text: a form (`GET /device/{id}/edit?id=...`), a confirmation that
/// shows each change, then `update` (PROTOCOL.md section 3.10) and an audit line. Operators only.
extension ConsoleApp {
    /// The fields the edit form changes: each a string field of `update`, cleared when left empty.
    public static let editedFields = ["alertTitle", "alertBody", "soundName"]
    /// `list` pages read to find the notification to edit, at most (1,000 notifications each).
    static let editListPages = 100

    /// `GET /device/{id}/edit?id=...`: the form, filled in with the notification's text.
    func editPage(
        _ device: String,
        _ request: ConsoleRequest,
        _ session: ConsoleSessions.Session,
        _ who: ConsolePages.SignedIn
    ) async -> ConsoleResponse {
        guard session.role.may(.edit) else {
            return notAllowed(who)
        }
        guard let id = request.queryValue("id"), Self.isNotificationId(id) else {
            return message(400, "No notification", "Choose Edit beside a notification on the device's page.", who)
        }
        switch await notification(id, of: device) {
        case .failure(let error):
            return unavailable(device, error, who)
        case .success(nil):
            return message(
                404,
                "Not found",
                "Device \(device) has no notification \(id) (cancelled meanwhile, perhaps).",
                who,
                back: device
            )
        case .success(let row?):
            return ConsoleResponse(
                status: 200,
                html: ConsolePages.edit(device: device, notification: row, signedIn: who)
            )
        }
    }

    /// `POST /device/{id}/act` with `action=edit`: the confirmation of what changes, then the
    /// `update` once confirmed (the form then carries only the fields that change).
    func edit(
        _ device: String,
        _ request: ConsoleRequest,
        _ session: ConsoleSessions.Session,
        _ who: ConsolePages.SignedIn
    ) async -> ConsoleResponse {
        let ids = request.formValues("ids")
        let given = Self.editedFields.compactMap { field in request.formValue(field).map { (field, $0) } }
        func record(_ outcome: AuditEntry.Outcome, _ detail: String? = nil) {
            auditAction(.edit, by: session, request, device: device, ids: Array(ids.prefix(1)), outcome, detail)
        }
        guard session.role.may(.edit) else {
            record(.forbidden)
            return notAllowed(who)
        }
        guard ids.count == 1, let id = ids.first, Self.isNotificationId(id) else {
            return message(400, "No notification", "Choose Edit beside one notification.", who, back: device)
        }
        guard request.formValue("confirm") == "yes" else {
            let current: JSONObject
            switch await notification(id, of: device) {
            case .failure(let error): return unavailable(device, error, who)
            case .success(nil):
                return message(404, "Not found", "Device \(device) has no notification \(id).", who, back: device)
            case .success(let row?): current = row
            }
            let changes = given.compactMap { field, value -> ConsolePages.Change? in
                let now = current[field]?.stringValue ?? ""
                // A body replaces several bodies (alertBodies), whatever they say.
                let several = field == "alertBody" && current["alertBodies"] != nil && !value.isEmpty
                return value == now && !several ? nil : ConsolePages.Change(field: field, from: now, to: value)
            }
            guard !changes.isEmpty else {
                return message(400, "Nothing to change", "The text is as it was: nothing was sent.", who, back: device)
            }
            return ConsoleResponse(
                status: 200,
                html: ConsolePages.confirmEdit(device: device, id: id, changes: changes, signedIn: who)
            )
        }
        guard !given.isEmpty else {
            return message(400, "Nothing to change", "The form named no field to change.", who, back: device)
        }
        var update: JSONObject = ["id": .string(id)]
        for (field, value) in given { update[field] = value.isEmpty ? .null : .string(value) }
        let changed = "changed " + given.map(\.0).joined(separator: ", ")
        switch await data.send(.update, device: device, update) {
        case .success:
            record(.ok, changed)
            return message(
                200,
                ConsoleAction.edit.result(count: 1),
                "Notification \(id) of device \(device) has its new text.",
                who,
                status: .success,
                back: device
            )
        case .failure(let error):
            record(.failed, error.message)
            return message(
                502,
                "Not done",
                "The worker refused or did not answer: \(error.message). Reload the device to see what changed.",
                who,
                back: device
            )
        }
    }

    /// The `list` row of notification `id`, following the pages of `list` (ordered by id) until it
    /// is found or passed; nil when the device does not have it.
    func notification(_ id: String, of device: String) async -> Result<JSONObject?, ConsoleDataError> {
        var cursor: String?
        for _ in 0..<Self.editListPages {
            var query: JSONObject = ["limit": 1000]
            if let cursor { query["cursor"] = .string(cursor) }
            switch await data.send(.list, device: device, query) {
            case .failure(let error):
                return .failure(error)
            case .success(let page):
                let rows = (page["notifications"]?.arrayValue ?? []).compactMap(\.objectValue)
                if let row = rows.first(where: { $0["id"]?.stringValue == id }) { return .success(row) }
                guard let next = page["cursor"]?.stringValue, next != cursor,
                    rows.last?["id"]?.stringValue.map({ $0 < id }) ?? false
                else { return .success(nil) }
                cursor = next
            }
        }
        return .success(nil)
    }

    /// A notification id as the protocol takes one: 1 to ``CommandDecoder/maxIdLength`` characters.
    static func isNotificationId(_ id: String) -> Bool { (1...CommandDecoder.maxIdLength).contains(id.count) }
}
