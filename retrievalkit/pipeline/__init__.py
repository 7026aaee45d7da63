"""The evaluation pipeline: ask, score, gate, compare and record runs."""
