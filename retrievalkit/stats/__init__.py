"""The statistics of runs: intervals, paired tests, power and sequential bounds."""
