"""Run the command line as ``python -m retrievalkit``."""

from retrievalkit.cli import main

raise SystemExit(main())
