import Foundation
import Testing

/// Reads a JSON fixture from `Fixtures/` (copied into the test bundle).
func loadFixture<T: Decodable>(_ name: String, as type: T.Type) throws -> T {
    let url = try #require(Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Fixtures"))
    return try JSONDecoder().decode(T.self, from: Data(contentsOf: url))
}
