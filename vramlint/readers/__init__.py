"""One reader per config format; each turns a Document into typed facts, never arithmetic."""
