"""The steps of a run: asking, scoring, recording, comparing and gating."""
