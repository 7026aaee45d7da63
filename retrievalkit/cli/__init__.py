"""The ``retrievalkit`` command line: parsing, streams, interrupts and the commands."""
