import ChimeProtocol

/// What the workers answered to one `find` (``ConsoleData/find(_:)``).
public struct FleetFindAnswers: Sendable, Hashable {
    /// Each worker's page, by worker id.
    public var pages: [String: FindPage]
    /// Workers that refused the query (an error reply), with the error's message, by worker id.
    public var refusals: [String: String]
    /// Workers online that did not answer in time.
    public var silent: [String]

    public init(pages: [String: FindPage], refusals: [String: String] = [:], silent: [String] = []) {
        self.pages = pages
        self.refusals = refusals
        self.silent = silent
    }
}

/// Finding devices: a device by its id (opened at once), or every device whose id starts with
/// some text and, or, that has a notification with a `userInfo` tag, across the fleet.
extension ConsoleApp {
    /// Devices a page of found devices lists.
    public static let foundPerPage = FleetFind.defaultLimit

    /// `GET /find`: the form; with `device` (and no `go=list`) that device's page; with `go=list`,
    /// or a tag and no device, the devices found across the fleet, a page at a time (`after`).
    func find(_ request: ConsoleRequest, _ who: ConsolePages.SignedIn) async -> ConsoleResponse {
        let text = request.queryValue("device")?.trimmingCharacters(in: .whitespaces) ?? ""
        let tag = Self.tag(request)
        let listing = request.queryValue("go") == "list" || (text.isEmpty && tag != nil)
        guard !text.isEmpty || listing else {
            return ConsoleResponse(status: 200, html: ConsolePages.find(query: nil, tag: tag, signedIn: who))
        }
        guard text.isEmpty || DeviceID.isValid(text) else {
            let error =
                "“\(text.prefix(140))” is not a device id, nor the beginning of one: 1 to 128 characters of A–Z, "
                + "a–z, 0–9, _ . : @ -."
            return ConsoleResponse(
                status: 400,
                html: ConsolePages.find(query: text, tag: tag, error: error, signedIn: who)
            )
        }
        guard listing else { return .redirect(ConsolePaths.device(text, tag: tag)) }
        let after = request.queryValue("after").flatMap { DeviceID.isValid($0) ? $0 : nil }
        let query = FindQuery(
            prefix: text.isEmpty ? nil : text,
            match: tag.map { [$0.key: .string($0.value)] },
            after: after,
            limit: Self.foundPerPage
        )
        switch await data.find(query) {
        case .failure(let error):
            let problem =
                error.code == "unreachable"
                ? "No worker could be asked: \(error.message). Check the fleet page: is a worker online?"
                : "The workers could not be asked: \(error.message)."
            return ConsoleResponse(
                status: error.code == "unreachable" ? 504 : 502,
                html: ConsolePages.find(query: text, tag: tag, error: problem, signedIn: who)
            )
        case .success(let answers):
            if let (worker, refusal) = answers.refusals.min(by: { $0.key < $1.key }), answers.pages.isEmpty {
                return ConsoleResponse(
                    status: 502,
                    html: ConsolePages.find(
                        query: text,
                        tag: tag,
                        error: "Worker \(worker) refused the search: \(refusal)",
                        signedIn: who
                    )
                )
            }
            let page = FindPage.merged(Array(answers.pages.values), limit: Self.foundPerPage)
            var problems = answers.silent.sorted().map { worker in
                "Worker \(worker) did not answer in time: the devices it serves are not listed. Search again in a "
                    + "moment."
            }
            problems += answers.refusals.sorted { $0.key < $1.key }.map { worker, refusal in
                "Worker \(worker) refused the search (\(refusal)): the devices it serves are not listed."
            }
            let found = ConsolePages.Found(devices: page.devices, next: page.next, after: after, problems: problems)
            return ConsoleResponse(
                status: 200,
                html: ConsolePages.find(query: text, tag: tag, found: found, signedIn: who)
            )
        }
    }
}
