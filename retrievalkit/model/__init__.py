"""Frozen value types of retrievalkit, with no I/O: questions, sets, outcomes and records."""
