import Testing

// The console's pure parts: accounts and password hashes, sessions, pages.
