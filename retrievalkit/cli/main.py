"""The ``retrievalkit`` command line: parse, dispatch, map errors onto exit codes.

Built-in commands live in `retrievalkit.cli.commands`; plugins add their own through
the ``retrievalkit.commands`` entry-point group. A plugin command is imported only when
it is run, and heavy libraries (numpy, scipy, rich) only inside commands, so
``--version`` and ``--help`` start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any

from retrievalkit._version import __version__
from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.errors import (
    EXIT_OK,
    EXIT_USAGE,
    InputError,
    PluginError,
    RetrievalkitError,
    one_line,
)
from retrievalkit.redaction import RedactingFilter, scrub_known

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
    from retrievalkit.cli.collector import owned

    with owned():
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

    for plugin in plugins.find(plugins.COMMANDS):
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


def _plugin_command(plugin: Any, arguments: list[str]) -> tuple[Any, argparse.Namespace]:
    """A command plugin loaded, its arguments parsed: what `_main` then runs (its run, with
    a missing dependency said as one line, and the arguments)."""
    from retrievalkit.plugins import registry as plugins
    from retrievalkit.plugins.missing import missing_dependency

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
        missing = missing_dependency(error, plugin, "command")
        if missing is not None:
            raise missing from error
        raise PluginError(
            f"command plugin {plugin.label} failed to set up its arguments: "
            f"{type(error).__name__}: {error}"
        ) from error
    args = parser.parse_args(arguments)

    def run(args: argparse.Namespace) -> Any:
        try:
            return command.run(args)
        except ImportError as error:
            # A command that imports its framework when it runs (qdrant index): what to
            # install, exit code 2, as for a plugin that fails to load.
            raise missing_dependency(error, plugin, "command") or error from error

    return run, args


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
    from retrievalkit.cli.interrupts import forget_kept, stop_signals_handled
    from retrievalkit.cli.streams import guard
    from retrievalkit.redaction import scrub_logs_and_warnings

    forget_kept()
    scrub_logs_and_warnings()
    for stream in (sys.stdout, sys.stderr):
        # PYTHONIOENCODING=ascii (or a C locale): a character the encoding lacks is shown
        # as an escape, never a crash after the run was saved.
        reconfigure = getattr(stream, "reconfigure", None)
        if callable(reconfigure):
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = guard(stdout), guard(stderr)
    try:
        with stop_signals_handled():
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
    verbose = "-v" in arguments or "--verbose" in arguments
    try:
        parser, plugin_commands = build_parser(arguments)
        if arguments and arguments[0] in plugin_commands:
            handler, args = _plugin_command(plugin_commands[arguments[0]], arguments[1:])
        else:
            args = parser.parse_args(arguments)
            if args.command is None:
                parser.print_help()
                return EXIT_USAGE
            handler = args.handler
        _configure_logging(args)
    except BaseException as error:  # argparse's --help and --version exit here, as they should
        if isinstance(error, SystemExit):
            raise
        return _failed(error, verbose)
    try:
        return _exit_code(handler(args))
    except BaseException as error:
        return _failed(error, verbose)


#: The codes a command may end with (DESIGN.md); anything else a plugin returns is exit 3.
_KNOWN_CODES = frozenset({0, 1, 2, 3})
#: 128 + SIGHUP, SIGINT or SIGTERM: a run stopped by a signal.
_SIGNAL_CODES = frozenset({129, 130, 143})


def _exit_code(returned: Any) -> int:
    from retrievalkit.errors import EXIT_EVALUATION_FAILED

    if type(returned) is int and returned in _KNOWN_CODES | _SIGNAL_CODES:
        return returned
    shown = one_line(scrub_known(repr(returned)))[:80]
    print(
        f"retrievalkit: error: the command returned {shown}, which is no exit code of "
        "retrievalkit (0, 1, 2 or 3)",
        file=sys.stderr,
    )
    return EXIT_EVALUATION_FAILED


def _failed(error: BaseException, verbose: bool) -> int:
    """One line on stderr naming what failed, and the exit code for it (never 1).

    Errors retrievalkit raises on purpose carry their code. A stop signal is 128 + its
    number. Everything else (a plugin's SystemExit or KeyboardInterrupt, an exception
    nobody caught, running out of memory) is exit 3: the run could not be carried out;
    with ``-v`` the traceback follows the line.
    """
    from retrievalkit.cli.interrupts import (
        Interrupted,
        exit_code_for,
        kept,
        signal_received,
        untouched,
        watching_interrupts,
    )
    from retrievalkit.errors import EXIT_EVALUATION_FAILED, EXIT_INTERRUPTED

    def say(message: str) -> None:
        print(f"retrievalkit: {one_line(scrub_known(message))}", file=sys.stderr)

    # What this command already made last (a run saved): said instead of "nothing was saved".
    made = kept()
    signalled = signal_received()
    if isinstance(error, KeyboardInterrupt) or signalled is not None:
        # A stop signal (also one that a library turned into another error on its way up,
        # as an import does), or a KeyboardInterrupt raised by code (a retriever's own):
        # either way the run was interrupted, and an interrupted run is never saved.
        real = (
            isinstance(error, Interrupted)
            or signalled is not None
            or not watching_interrupts()  # someone else's Ctrl-C handler: take it as real
        )
        signum = error.signum if isinstance(error, Interrupted) else signalled
        why = "" if real else f" (KeyboardInterrupt raised without a signal{_origin(error)})"
        print(f"retrievalkit: interrupted{why}; {made or untouched()}", file=sys.stderr)
        return exit_code_for(signum) if signum else EXIT_INTERRUPTED
    if isinstance(error, RetrievalkitError):
        text = str(error)
        if made is not None and made not in text:
            text = f"{text} ({made})"
        say(f"error: {text}")
        return error.exit_code
    made = made or untouched()
    if isinstance(error, OSError) and error.errno in (
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.EILSEQ,
    ):
        # A path no file system accepts (a name over 255 bytes, a loop of symlinks) that
        # reached a system call unchecked: still one line naming it, and exit code 2.
        where = one_line(str(error.filename or ""))[:80]
        say(f"error: {where}: {error.strerror} (check the paths given)")
        return EXIT_USAGE
    if verbose:
        import traceback

        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        print(scrub_known(text), file=sys.stderr, end="")
    say(f"error: {describe_failure(error)}; {made}")
    return EXIT_EVALUATION_FAILED


def describe_failure(error: BaseException) -> str:
    """What an unexpected error says in one line: its kind, where it came from, its text."""
    if isinstance(error, MemoryError):
        return "out of memory (try a smaller set, fewer --resamples or a lower --concurrency)"
    if isinstance(error, SystemExit):
        return (
            f"plugin code called exit({error.code!r}){_origin(error)}; retrievalkit does not "
            "end with a plugin's exit code"
        )
    if isinstance(error, KeyboardInterrupt):
        return f"KeyboardInterrupt raised without a signal{_origin(error)}"
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        where = f" writing {error.filename}" if error.filename else ""
        return f"disk full{where}"
    if isinstance(error, OSError) and error.strerror:
        where = f"{error.filename}: " if error.filename else ""
        return f"{where}{error.strerror}{_origin(error)}"
    text = " ".join(str(error).split())[:300]
    return f"{type(error).__name__}{_origin(error)}" + (f": {text}" if text else "")


def _origin(error: BaseException) -> str:
    """`` in MODULE`` for the innermost frame outside retrievalkit, or nothing."""
    frame = error.__traceback__
    module = None
    while frame is not None:
        name = frame.tb_frame.f_globals.get("__name__", "")
        if isinstance(name, str) and name.split(".")[0] != "retrievalkit":
            module = name
        frame = frame.tb_next
    return f" in {module}" if module and module not in ("__main__", "runpy") else ""


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
