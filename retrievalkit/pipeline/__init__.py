"""The steps of an evaluation: ask, score, record, choose a baseline, gate, compare."""
