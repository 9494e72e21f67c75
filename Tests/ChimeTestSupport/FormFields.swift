/// Name and value pairs (an HTTP form's, a query's) as `name=value` strings, to compare: tuples are
/// not Equatable.
public func formText(_ fields: [(String, String)]?) -> [String]? { fields?.map { "\($0)=\($1)" } }
