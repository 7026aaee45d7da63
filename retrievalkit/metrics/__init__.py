"""The metrics: each defined once, computed by column, turned into a run's table."""
