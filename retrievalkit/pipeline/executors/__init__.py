"""Places other than this process where an evaluation can run."""
