"""The evaluation pipeline: asking retrievers, scoring, storing, comparing and gating runs."""
