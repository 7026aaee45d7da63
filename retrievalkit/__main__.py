"""Run the command line as ``python -m retrievalkit``."""

from retrievalkit.cli.entry import entry

entry()
