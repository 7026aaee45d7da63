"""The command line sets a command's long-lived objects aside from the cyclic collector,
and hands them back when the command ends, however it ends."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from retrievalkit.cli import collector
from retrievalkit.cli.main import main
from retrievalkit.demo import DEMO_SET


@pytest.fixture(autouse=True)
def nothing_frozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def watch(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, probe: Callable[[], Any]
) -> list[Any]:
    """What ``probe()`` gives each time ``module.name`` is called, which it then is."""
    seen: list[Any] = []
    function = getattr(module, name)

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(probe())
        return function(*args, **kwargs)

    monkeypatch.setattr(module, name, watched)
    return seen


def frozen_while_linting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of frozen objects seen while validate checks its set."""
    import retrievalkit.pipeline.authoring.validation as validation

    return watch(monkeypatch, validation, "lint_set", gc.get_freeze_count)


def test_validate_freezes_its_loaded_set_and_unfreezes_it_at_the_end(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = frozen_while_linting(monkeypatch)
    assert main(["validate", "--set", str(DEMO_SET), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["questions"] > 0
    # The demo's questions (and what was imported) were set aside while it ran ...
    assert seen and seen[0] > 1000
    # ... and nothing stays frozen after it.
    assert gc.get_freeze_count() == 0


def test_a_failing_command_unfreezes_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import retrievalkit.pipeline.authoring.validation as validation

    frozen: list[int] = []

    def broken(*args: Any, **kwargs: Any) -> Any:
        frozen.append(gc.get_freeze_count())
        raise RuntimeError("lint failed")

    monkeypatch.setattr(validation, "lint_set", broken)
    assert main(["validate", "--set", str(DEMO_SET)]) != 0
    assert "lint failed" in capsys.readouterr().err
    assert frozen and frozen[0] > 0
    assert gc.get_freeze_count() == 0


def test_objects_the_calling_program_froze_stay_frozen(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gc.freeze()  # the program around the command froze its own objects
    before = gc.get_freeze_count()
    seen = frozen_while_linting(monkeypatch)
    assert main(["validate", "--set", str(DEMO_SET), "--format", "json"]) == 0
    capsys.readouterr()
    # Left as it was: not frozen further by the command (frozen objects may still be
    # freed by reference counting), and not unfrozen after it.
    assert len(seen) == 1 and seen[0] <= before
    assert 0 < gc.get_freeze_count() <= before


def test_keeping_outside_a_command_leaves_the_collector_alone() -> None:
    with collector.keeping():
        assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_set_is_read_without_collections_and_the_collector_is_back_after(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import retrievalkit.plugins.resolution as resolution

    enabled = watch(monkeypatch, resolution, "resolve_set", gc.isenabled)
    seen = frozen_while_linting(monkeypatch)
    assert main(["validate", "--set", str(DEMO_SET), "--format", "json"]) == 0
    capsys.readouterr()
    assert enabled == [False] and seen[0] > 1000 and gc.isenabled()
