import ChimeCore
import ChimeSupport

/// The selector flags of `cancel`, `pause` and `resume`: `--id` (repeatable), `--tag key=value`
/// (repeatable, all must match the notification's userInfo) or `--all`.
struct SelectorFlags: Sendable {
    static let specs: [Flags.Spec] = [
        .init("id", env: false, repeatable: true, "a notification id"),
        .init("tag", env: false, repeatable: true, "userInfo key=value (key:=json) the notification must have"),
        .init("all", value: false, env: false, "every notification of the device"),
    ]

    let selector: JSONObject

    init(_ flags: Flags) throws(UsageError) {
        let ids = flags.all("id")
        let tags = try Parse.keyValues(flags.all("tag"), flag: "tag")
        let all = flags.isSet("all")
        switch (!ids.isEmpty, tags != nil, all) {
        case (true, false, false):
            guard ids.allSatisfy({ !$0.isEmpty && $0.count <= 128 }) else {
                throw UsageError("--id must be 1 to 128 characters")
            }
            selector = ["ids": .array(ids.map(JSON.string))]
        case (false, true, false):
            selector = ["match": ["userInfo": .object(tags!)]]
        case (false, false, true):
            selector = ["all": true]
        case (false, false, false):
            throw UsageError("say which: --id ID, --tag key=value or --all")
        default:
            throw UsageError("give one kind of selector: --id, --tag or --all")
        }
    }
}

/// What `cancel`, `pause` and `resume` share: a selector sent as one command, the ids it touched
/// printed.
protocol SelectorCommand: Command {
    static var operation: ChimeCore.Operation { get }
    /// The verb printed (`cancelled`).
    static var resultKey: String { get }
    var request: DeviceRequest { get }
    var selector: SelectorFlags { get }
    /// The memberwise initializer every conforming struct has.
    init(request: DeviceRequest, selector: SelectorFlags)
}

extension SelectorCommand {
    static var synopsis: String { "chime \(name) --device ID (--id ID... | --tag KEY=VALUE... | --all) [options]" }
    static var specs: [Flags.Spec] {
        [ConnectionOptions.deviceSpec] + SelectorFlags.specs
            + [DeviceRequest.rawSpec] + ConnectionOptions.specs
    }

    init(_ flags: Flags) throws(UsageError) {
        self.init(request: try DeviceRequest(flags), selector: try SelectorFlags(flags))
    }

    func run(_ console: Console) async throws(CLIFailure) {
        try await request.send(Self.operation, selector.selector, console) { (_, result) throws(CLIFailure) in
            let ids: [String]
            switch result {
            case .cancelled(let touched), .paused(let touched), .resumed(let touched): ids = touched
            default: ids = []
            }
            if ids.isEmpty {
                console.out("\(Self.resultKey) nothing: no notification matched")
            } else {
                console.out("\(Self.resultKey) \(ids.count): \(ids.joined(separator: ", "))")
            }
        }
    }
}

/// `chime cancel`.
struct CancelCommand: SelectorCommand {
    static let name = "cancel"
    static let operation = ChimeCore.Operation.cancel
    static let resultKey = "cancelled"
    static let summary = "cancel notifications by id, by userInfo tag, or all"
    static let discussion = """
        Cancels the selected notifications of the device (and their snoozes). Cancelling what does not
        exist is not an error.
        """
    static let examples: [(comment: String, command: String)] = [
        ("two notifications by id", "chime cancel --device phone-1 --id med --id standup"),
        ("every notification whose userInfo has team \"core\"", "chime cancel --device phone-1 --tag team=core"),
        ("everything", "chime cancel --device phone-1 --all"),
    ]

    let request: DeviceRequest
    let selector: SelectorFlags
}

/// `chime pause`.
struct PauseCommand: SelectorCommand {
    static let name = "pause"
    static let operation = ChimeCore.Operation.pause
    static let resultKey = "paused"
    static let summary = "pause notifications (kept, not fired) by id, tag, or all"
    static let discussion = "Pauses the selected notifications: they stay listed but do not fire until resumed."
    static let examples: [(comment: String, command: String)] = [
        ("pause one", "chime pause --device phone-1 --id standup"),
        ("pause every notification tagged kind=marketing", "chime pause --device phone-1 --tag kind=marketing"),
    ]

    let request: DeviceRequest
    let selector: SelectorFlags
}

/// `chime resume`.
struct ResumeCommand: SelectorCommand {
    static let name = "resume"
    static let operation = ChimeCore.Operation.resume
    static let resultKey = "resumed"
    static let summary = "resume paused notifications by id, tag, or all"
    static let discussion = """
        Resumes the selected notifications: each next occurrence is computed from now (a one-shot
        whose time passed while it was paused fires at once).
        """
    static let examples: [(comment: String, command: String)] = [
        ("resume one", "chime resume --device phone-1 --id standup"),
        ("resume everything", "chime resume --device phone-1 --all"),
    ]

    let request: DeviceRequest
    let selector: SelectorFlags
}
