"""The statistics of retrievalkit: intervals, paired tests, power and sequential decisions."""
