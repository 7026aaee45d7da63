"""Writing golden sets: generating questions, judging answers, validating labels."""
