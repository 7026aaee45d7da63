"""The steps of an evaluation, from asking the questions to the gate and the sweep."""
