// The journal lands here.
