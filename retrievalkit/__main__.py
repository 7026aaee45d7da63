"""Run the command line as ``python -m retrievalkit``."""

from retrievalkit.cli.main import main

raise SystemExit(main())
