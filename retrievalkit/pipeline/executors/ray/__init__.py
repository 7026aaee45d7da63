"""Running an evaluation's questions on a Ray cluster."""
