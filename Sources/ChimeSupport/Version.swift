/// The version `chimed --version` and `chime --version` print.
public let chimeVersion = "0.1.0"
