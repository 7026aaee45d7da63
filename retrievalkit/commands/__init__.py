"""The subcommands of ``retrievalkit``, one module each.

A command (built-in, or contributed by a plugin through the ``retrievalkit.commands``
entry-point group) is any object or module with:

* ``HELP``: one line for ``retrievalkit --help``;
* ``configure(parser)``: adds its arguments to an ``argparse.ArgumentParser``;
* ``run(args) -> int``: does the work and returns the exit code.
"""

from __future__ import annotations

import argparse
from typing import Protocol, runtime_checkable

#: Built-in commands in the order ``--help`` lists them (module names under this package).
BUILTIN = (
    "evaluate",
    "compare",
    "power",
    "baseline",
    "listing",
    "history",
    "show",
    "report",
    "validate",
    "fidelity",
    "export",
    "generate",
    "judge",
    "judge_agreement",
)


@runtime_checkable
class Command(Protocol):
    HELP: str

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...
