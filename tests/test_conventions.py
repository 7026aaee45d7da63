"""Conventions users check for: NO_COLOR, --no-color, -v, --quiet, pipes, python -m, py.typed."""

from __future__ import annotations

import argparse
import os
import pty
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO

from retrievalkit import __version__

EVAL = ("eval", "--set", "demo", "--retriever", "bm25-demo", "--store", "memory:")
#: The progress bar's label (shown only while it runs, on stderr).
PROGRESS = "bm25-demo on demo"
#: An SGR sequence that sets a colour: 30-37/90-97 foreground, 40-47/100-107 background,
#: 38;... / 48;... for 256 and true colours. Bold (1) and italic (3) are not colours.
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-8]|4[0-8]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")


def environment(**changes: str) -> dict[str, str]:
    """The environment of a colour-capable terminal user, without colour overrides."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "PYTHONPATH")
    }
    env.update(TERM="xterm-256color", COLUMNS="160", **changes)
    return env


def in_terminal(*args: str, env: dict[str, str], cwd: Path) -> str:
    """Run ``python -m retrievalkit ARGS`` with stdout and stderr on a pseudo-terminal."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "retrievalkit", *args],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=env,
        cwd=cwd,
        close_fds=True,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:  # the terminal closed: the process has exited
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    assert process.wait(timeout=120) == 0
    return b"".join(chunks).decode("utf-8", "replace")


def piped(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_a_terminal_gets_colour_and_a_progress_bar(tmp_path: Path) -> None:
    # The control case: without it, the checks below could pass on output that never
    # had colour in the first place.
    output = in_terminal(*EVAL, env=environment(), cwd=tmp_path)
    assert COLOUR.search(output)
    assert PROGRESS in output


@pytest.mark.parametrize(
    ("extra", "env"),
    [((), {"NO_COLOR": "1"}), ((), {"NO_COLOR": "anything"}), (("--no-color",), {})],
)
def test_no_color_and_the_flag_turn_colour_off_in_a_terminal(
    tmp_path: Path, extra: tuple[str, ...], env: dict[str, str]
) -> None:
    output = in_terminal(*EVAL, *extra, env=environment(**env), cwd=tmp_path)
    assert not COLOUR.search(output)
    assert "hit@1" in output


def test_an_empty_no_color_does_not_turn_colour_off(tmp_path: Path) -> None:
    # no-color.org: only a NO_COLOR that is present *and not empty* disables colour.
    output = in_terminal(*EVAL, env=environment(NO_COLOR=""), cwd=tmp_path)
    assert COLOUR.search(output)


@pytest.mark.parametrize(
    "args",
    [
        EVAL,
        (*EVAL, "--format", "markdown"),
        ("list",),
        ("history", "--set", "demo", "--retriever", "bm25-demo", "--store", "memory:"),
        ("validate", "--set", "demo"),
    ],
)
def test_output_to_a_pipe_has_no_colour_and_no_progress_bar(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    result = piped(*args, env=environment(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for stream in (result.stdout, result.stderr):
        assert "\x1b[" not in stream
        assert PROGRESS not in stream


def test_verbose_logs_to_stderr_and_quiet_keeps_it_short(tmp_path: Path) -> None:
    env = environment()
    plain = piped(*EVAL, env=env, cwd=tmp_path)
    verbose = piped(*EVAL, "-v", env=env, cwd=tmp_path)
    quiet = piped(*EVAL, "--quiet", env=env, cwd=tmp_path)
    assert "INFO" not in plain.stderr
    assert (
        "retrievalkit: INFO: retrievalkit.plugins.registry: "
        "loaded plugin retrievalkit-eval[bm25-demo]" in verbose.stderr
    )
    assert "retrievalkit: INFO: retrievalkit.stores: opened store memory:" in verbose.stderr
    assert "INFO" not in verbose.stdout, "logs never mix into the report"
    assert "q01" in plain.stdout and "q01" not in quiet.stdout, "no per-question table"
    assert "hit@1" in quiet.stdout


def test_verbose_is_offered_by_every_built_in_command(tmp_path: Path) -> None:
    from retrievalkit.cli.main import build_parser

    def leaves(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
        """The parsers that run something: commands, and the actions of grouped commands."""
        groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not groups:
            yield parser
        for group in groups:
            for sub in group.choices.values():
                yield from leaves(sub)

    parser, plugin_commands = build_parser()
    checked = 0
    for leaf in leaves(parser):
        if leaf is parser or leaf.prog.split()[1] in plugin_commands:
            continue
        flags = {flag for action in leaf._actions for flag in action.option_strings}
        assert {"-v", "--verbose", "--no-color"} <= flags, leaf.prog
        checked += 1
    assert checked >= 8


@pytest.mark.timeout(900)  # builds and installs a wheel in a fresh environment
def test_python_dash_m_runs_the_command_line(tmp_path: Path) -> None:
    result = piped("--version", env=environment(), cwd=tmp_path)
    assert (result.returncode, result.stdout.strip()) == (0, f"retrievalkit {__version__}")


def _build_wheel(out: Path, tmp_path: Path) -> Path:
    """Build the wheel from a copy of the sources, as pip or uv would for an install."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(
        REPO / "retrievalkit",
        source / "retrievalkit",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    uv = shutil.which("uv")
    if pip.returncode == 0:
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out)]
    elif uv is not None:  # a uv-made virtualenv, as nox makes, has no pip
        command = [uv, "build", "--wheel", "-q", "-o", str(out)]
    else:
        pytest.fail("neither pip nor uv is available to build the wheel")
    built = subprocess.run(
        [*command, str(source)], capture_output=True, text=True, check=False, timeout=600
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = out.glob("retrievalkit_eval-*.whl")
    return wheel


def test_the_wheel_ships_py_typed_the_demo_and_the_entry_points(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "dist", tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        registered = archive.read(entry_points).decode()
        (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        classifiers = archive.read(metadata).decode()
    assert {
        "retrievalkit/py.typed",
        "retrievalkit/__main__.py",
        "retrievalkit/testing/__init__.py",
        "retrievalkit/testing/stores.py",
        "retrievalkit/formats/golden_sets/fast_jsonl.py",
        "retrievalkit/formats/trec.py",
        "retrievalkit/demo/corpus.jsonl",
        "retrievalkit/demo/golden.jsonl",
    } <= names
    assert "run = retrievalkit.retrievers.run:create_run" in registered
    assert "retrievalkit = retrievalkit.cli.entry:entry" in registered
    assert "Classifier: Typing :: Typed" in classifiers
    # `retrievalkit` on PyPI is another project: the distribution is published by this name.
    assert "\nName: retrievalkit-eval\n" in classifiers


def test_a_changelog_sits_at_the_root_and_names_this_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert changelog.startswith("# Changelog")
    assert re.search(rf"^## \[{re.escape(__version__)}\]", changelog, re.MULTILINE)
