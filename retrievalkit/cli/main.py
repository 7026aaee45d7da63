"""The ``retrievalkit`` command line: parse, dispatch, map errors onto exit codes.

Built-in commands live in `retrievalkit.commands`; plugins add their own through
the ``retrievalkit.commands`` entry-point group. A plugin command is imported only when
it is run, and heavy libraries (numpy, scipy, rich) only inside commands, so
``--version`` and ``--help`` start fast.
"""

from __future__ import annotations

import argparse
import errno
import functools
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any

from retrievalkit import __version__
from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    InputError,
    PluginError,
    RetrievalkitError,
    one_line,
)
from retrievalkit.redaction import RedactingFilter, scrub_known

COMMANDS_GROUP = "retrievalkit.commands"  # plugins.COMMANDS

EXIT_CODES = """\
exit codes:
  0  done (a regression without --fail-on-regression still exits 0 and says so)
  1  regression found with --fail-on-regression
  2  bad usage, configuration or input (the message names the file, line and field)
  3  the evaluation could not be carried out (retriever unreachable, error rate over the limit)
"""


class Parser(argparse.ArgumentParser):
    """argparse that raises an `InputError` (exit code 2, one line) on bad usage.

    An unknown flag is answered with the closest flags the command does accept, and the
    help of that command (not the top-level one) is the one pointed to.
    """

    def error(self, message: str) -> Any:
        import difflib
        import re

        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            offered = re.findall(r"'([^']*)'", choice.group(2)) or choice.group(2).split(", ")
            close = difflib.get_close_matches(choice.group(1), offered, n=2, cutoff=0.6)
            if close:
                message += f"; did you mean {' or '.join(close)}?"
        raise InputError(message, hint=f"see '{self.prog} --help'")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self._command_parser(parsed)
            raise InputError(
                f"unrecognized arguments: {' '.join(extras)}" + command._suggestions(extras),
                hint=f"see '{command.prog} --help'",
            )
        return parsed

    def _command_parser(self, parsed: argparse.Namespace) -> Parser:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest or "", None) or "")
                if isinstance(chosen, Parser):
                    return chosen._command_parser(parsed)
        return self

    def _suggestions(self, extras: Sequence[str]) -> str:
        import difflib

        flags = [flag for action in self._actions for flag in action.option_strings]
        found = []
        for extra in extras:
            if not extra.startswith("-"):
                continue
            flag = extra.split("=", 1)[0]
            close = difflib.get_close_matches(flag, flags, n=2, cutoff=0.6)
            if close:
                found.append(f"{flag}: did you mean {' or '.join(close)}?")
        return f" ({'; '.join(found)})" if found else ""


def _builtin(module: str) -> Any:
    return importlib.import_module(f"retrievalkit.cli.commands.{module}")


def _run_builtin(module: str, args: argparse.Namespace) -> int:
    """Run a built-in command, imported only now: help lists every command unimported."""
    return int(_builtin(module).run(args))


def build_parser(
    arguments: Sequence[str] | None = None,
) -> tuple[argparse.ArgumentParser, dict[str, Any]]:
    """The parser, and for each plugin command name the entry point that provides it.

    Given the command line's ``arguments``, only the command they name gets its
    arguments added (the others can never be reached by them, and adding theirs costs
    start-up time); without them, every command is complete.
    """
    parser = Parser(
        prog="retrievalkit",
        description="Measure the retrieval step of search and RAG systems against a golden "
        "question set, and gate CI on regressions.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"retrievalkit {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    named = _command_named(arguments)
    for module_name, (name, summary) in SUMMARIES.items():
        sub = commands.add_parser(
            name,
            help=summary,
            description=summary,
            epilog=EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if arguments is None or named == name:
            _builtin(module_name).configure(sub)
        sub.set_defaults(handler=functools.partial(_run_builtin, module_name))
    plugin_commands: dict[str, Any] = {}
    from retrievalkit.plugins import registry as plugins

    for plugin in plugins.find(COMMANDS_GROUP):
        if plugin.name in plugin_commands or plugin.name in commands.choices:
            continue
        plugin_commands[plugin.name] = plugin
        sub = commands.add_parser(
            plugin.name,
            help=f"(from {plugin.package}) run 'retrievalkit {plugin.name} --help'",
            add_help=False,
        )
        sub.add_argument("arguments", nargs=argparse.REMAINDER)
    return parser, plugin_commands


def _command_named(arguments: Sequence[str] | None) -> str | None:
    """The command a command line runs: its first argument that is not an option (the
    top-level parser's only options, --help and --version, take no value), or the one
    after ``--``."""
    rest = list(arguments or ())
    for index, argument in enumerate(rest):
        if argument == "--":
            return rest[index + 1] if index + 1 < len(rest) else None
        if not argument.startswith("-"):
            return argument
    return None


def _run_plugin_command(plugin: Any, arguments: list[str]) -> int:
    from retrievalkit.plugins import registry as plugins

    command = plugins.as_command(plugin, plugins.load(plugin))
    parser = Parser(
        prog=f"retrievalkit {plugin.name}",
        description=command.HELP,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    try:
        command.configure(parser)
    except Exception as error:
        raise PluginError(
            f"command plugin {plugin.label} failed to set up its arguments: "
            f"{type(error).__name__}: {error}"
        ) from error
    args = parser.parse_args(arguments)
    _configure_logging(args)
    return int(command.run(args))


def _configure_logging(args: argparse.Namespace) -> None:
    """``-v``: INFO and up to stderr; ``--quiet``: errors only; otherwise Python's default."""
    if getattr(args, "verbose", False):
        level = logging.INFO
    elif getattr(args, "quiet", False):
        level = logging.ERROR
    else:
        return
    handler = logging.StreamHandler(sys.stderr)
    # The handler's own level too: some libraries (bm25s) set their loggers to DEBUG.
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("retrievalkit: %(levelname)s: %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    logging.basicConfig(level=level, handlers=[handler])


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code never depends on whether anyone still reads the output."""
    from retrievalkit.cli.streams import guard
    from retrievalkit.redaction import scrub_logs_and_warnings

    scrub_logs_and_warnings()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = guard(stdout), guard(stderr)
    try:
        code = _main(argv)
        sys.stdout.flush()
        sys.stderr.flush()
        return code
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def _main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if logging.lastResort is not None and not logging.lastResort.filters:
        # Warnings go through Python's last-resort handler when no -v or -q configured one.
        logging.lastResort.addFilter(RedactingFilter())
    if arguments == ["--version"]:
        # What argparse would print, without importing every command and scanning the
        # installed packages for plugin commands first.
        print(f"retrievalkit {__version__}")
        return EXIT_OK
    try:
        parser, plugin_commands = build_parser(arguments)
        if arguments and arguments[0] in plugin_commands:
            return _run_plugin_command(plugin_commands[arguments[0]], arguments[1:])
        args = parser.parse_args(arguments)
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        _configure_logging(args)
        return int(args.handler(args))
    except RetrievalkitError as error:
        print(f"retrievalkit: error: {one_line(scrub_known(str(error)))}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("retrievalkit: interrupted; nothing was saved", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as error:
        # A path no file system accepts (a name over 255 bytes, a loop of symlinks) that
        # reached a system call unchecked: still one line naming it, and exit code 2.
        if error.errno not in (errno.ENAMETOOLONG, errno.ELOOP, errno.EILSEQ):
            raise
        where = one_line(str(error.filename or ""))[:80]
        print(
            f"retrievalkit: error: {where}: {error.strerror} (check the paths given)",
            file=sys.stderr,
        )
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
