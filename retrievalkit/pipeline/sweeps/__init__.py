"""Running a grid of configurations and splitting its cells."""
