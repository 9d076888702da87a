"""Checks at submit time: vramlint inside the tools that queue jobs (each needs its own extra)."""
