"""Commands contributed by an installed package through the ``retrievalkit.commands`` group."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import RunCli, _install, _write_package

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "rk-cmdplugin"
version = "0.2.0"

[project.entry-points."retrievalkit.commands"]
hello = "rk_cmdplugin"
half-cmd = "rk_cmdplugin:HALF"
broken-cmd = "rk_cmdplugin_broken"
eval = "rk_cmdplugin"

[tool.setuptools]
py-modules = ["rk_cmdplugin", "rk_cmdplugin_broken"]
"""

MODULE = '''\
"""A plugin command: a module with HELP, configure(parser) and run(args)."""

HELP = "Say hello from a plugin command."


def configure(parser):
    parser.add_argument("--name", default="world", help="who to greet")
    parser.add_argument("--exit-code", type=int, default=0, help="the exit code to return")


def run(args):
    print(f"hello, {args.name}")
    return args.exit_code


class _Half:
    """Has HELP and configure, but no run."""

    HELP = "an incomplete command"

    def configure(self, parser):
        pass


HALF = _Half()
'''

BROKEN = '''\
"""A command module that cannot be imported, on purpose."""

raise ImportError("rk_cmdplugin_broken is deliberately broken")
'''


@pytest.fixture(scope="module")
def command_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """rk-cmdplugin, built from source and pip-installed into a folder of its own."""
    root = tmp_path_factory.mktemp("command-plugin")
    source = _write_package(
        root / "src", PYPROJECT, {"rk_cmdplugin": MODULE, "rk_cmdplugin_broken": BROKEN}
    )
    _install({source: root / "site"})
    yield root / "site"


def test_help_lists_the_plugin_command(cli: RunCli, command_site: Path) -> None:
    result = cli("--help", sites=[command_site])
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.strip().startswith("hello")]
    assert "(from rk-cmdplugin)" in line
    assert "hello" not in cli("--help").stdout, "not installed: not listed"


def test_the_plugin_command_has_its_own_help(cli: RunCli, command_site: Path) -> None:
    result = cli("hello", "--help", sites=[command_site])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: retrievalkit hello")
    assert "Say hello from a plugin command." in result.stdout
    assert "--name NAME" in result.stdout and "who to greet" in result.stdout


def test_the_plugin_command_runs_and_its_exit_code_is_kept(cli: RunCli, command_site: Path) -> None:
    result = cli("hello", "--name", "Ada", sites=[command_site])
    assert (result.returncode, result.stdout) == (0, "hello, Ada\n"), result.stderr
    assert cli("hello", "--exit-code", "3", sites=[command_site]).returncode == 3


def test_bad_arguments_to_a_plugin_command_are_usage_errors(
    cli: RunCli, command_site: Path
) -> None:
    result = cli("hello", "--shout", sites=[command_site])
    assert result.returncode == 2
    assert "unrecognized arguments: --shout" in result.stderr
    assert "retrievalkit hello --help" in result.stderr


@pytest.mark.parametrize(
    ("name", "why"), [("broken-cmd", "ImportError"), ("half-cmd", "lacks run")]
)
def test_a_broken_command_plugin_exits_2_naming_it(
    cli: RunCli, command_site: Path, name: str, why: str
) -> None:
    result = cli(name, sites=[command_site])
    assert result.returncode == 2
    assert f"rk-cmdplugin[{name}]" in result.stderr
    assert why in result.stderr
    assert "Traceback" not in result.stderr


def test_a_plugin_cannot_take_over_a_built_in_command(cli: RunCli, command_site: Path) -> None:
    result = cli("eval", "--help", sites=[command_site])
    assert result.returncode == 0
    assert "--retriever NAME" in result.stdout, "eval is still the built-in"


def test_list_shows_commands_and_check_flags_the_broken_ones(
    cli: RunCli, command_site: Path
) -> None:
    result = cli("list", "--format", "json", sites=[command_site])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["broken"] == []  # metadata only: nothing imported
    result = cli("list", "--check", "--format", "json", sites=[command_site])
    assert result.returncode == 1, result.stderr
    listing = json.loads(result.stdout)
    commands = {entry["name"]: entry["provider"] for entry in listing["commands"]}
    assert commands["hello"] == "rk-cmdplugin[hello]"
    assert commands["export"] == "retrievalkit (built-in)"
    assert [entry["provider"] for entry in listing["commands"] if entry["name"] == "eval"] == [
        "retrievalkit (built-in)",
        "rk-cmdplugin[eval] (hidden by the built-in command of that name)",
    ]
    broken = {entry["plugin"]: entry for entry in listing["broken"]}
    assert set(broken) == {"rk-cmdplugin[broken-cmd]", "rk-cmdplugin[half-cmd]"}
    assert all(entry["group"] == "retrievalkit.commands" for entry in broken.values())
    [hidden] = listing["collisions"]
    assert hidden["packages"] == ["retrievalkit (built-in)", "rk-cmdplugin[eval]"]
    table = cli("list", sites=[command_site]).stdout
    assert "commands:" in table and "rk-cmdplugin[hello]" in table
