"""One way to write a number: the module every table, report, page and log line uses."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from retrievalkit.formats import numbers
from retrievalkit.formats.numbers import (
    NONE,
    bounds,
    difference_and_interval,
    mean_and_interval,
    number,
    p_text,
    percent,
    signed,
    signed_bounds,
)

PACKAGE = Path(numbers.__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("value", "written"),
    [(None, NONE), (0.0, "0.000"), (0.51249, "0.512"), (0.5125, "0.512"), (1.0, "1.000")],
)
def test_a_value_has_three_decimals(value: float | None, written: str) -> None:
    assert number(value) == written


def test_digits_can_be_asked_for() -> None:
    assert number(2.0 / 3.0, 1) == "0.7"
    assert signed(-2.0 / 3.0, 2) == "-0.67"


@pytest.mark.parametrize(
    ("value", "written"), [(None, NONE), (0.0, "+0.000"), (0.012, "+0.012"), (-0.0344, "-0.034")]
)
def test_a_difference_carries_its_sign(value: float | None, written: str) -> None:
    assert signed(value) == written


def test_intervals() -> None:
    assert bounds(None) == NONE
    assert bounds((0.401, 0.62)) == "[0.401, 0.620]"
    assert bounds((-0.01, 0.034), sign=True) == "[-0.010, +0.034]"
    assert signed_bounds(-0.01, 0.034) == "[-0.010, +0.034]"
    assert signed_bounds(None, 0.034) == NONE
    assert signed_bounds(-0.01, None) == NONE


def test_a_value_with_its_interval() -> None:
    assert mean_and_interval(0.512, (0.431, 0.59)) == "0.512 [0.431, 0.590]"
    assert mean_and_interval(0.512, None) == "0.512"
    assert mean_and_interval(None, (0.1, 0.2)) == NONE
    assert difference_and_interval(0.012, (-0.01, 0.034)) == "+0.012 [-0.010, +0.034]"
    assert difference_and_interval(-0.012, None) == "-0.012"
    assert difference_and_interval(None, (0.1, 0.2)) == NONE


@pytest.mark.parametrize(
    ("value", "written"),
    [(None, NONE), (0.0, "<0.001"), (0.000999, "<0.001"), (0.001, "0.001"), (0.0431, "0.043")],
)
def test_p_values_are_floored(value: float | None, written: str) -> None:
    assert p_text(value) == written


def test_latencies_ratios_and_increases() -> None:
    assert numbers.milliseconds(45.234) == "45.2 ms"
    assert numbers.milliseconds(0.0524) == "0.052 ms"
    assert numbers.milliseconds(45.234, 2) == "45.23 ms"
    assert numbers.milliseconds(None) == NONE
    assert numbers.milliseconds_interval((8.5, 12.25)) == "[8.5, 12.2] ms"
    assert numbers.milliseconds_interval((0.01, 0.2)) == "[0.010, 0.200] ms"
    assert numbers.milliseconds_interval(None) == NONE
    assert numbers.ratio(1.2849) == "1.285x" and numbers.ratio(None) == NONE
    assert numbers.ratio_interval((1.1, 1.377)) == "[1.100, 1.377]"
    assert numbers.increase(0.2) == "+20%" and numbers.increase(0.125) == "+12.5%"
    assert numbers.increase(None) == NONE


def test_confidence_levels() -> None:
    assert [percent(level) for level in (0.95, 0.8, 0.975)] == ["95%", "80%", "97.5%"]


def _string_constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_no_module_writes_its_own_no_value_glyph() -> None:
    """An undefined value is written as ``NONE`` everywhere: a bare dash in a string of
    code (a template's ``or "–"``, an em dash in one view) is a second convention."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == Path(numbers.__file__).resolve():
            continue
        for line, text in _string_constants(path):
            for glyph in ("–", "—"):
                quoted = f'"{glyph}"' in text or f"'{glyph}'" in text or text == glyph
                # In a template: a dash alone between markup or tags (``%}–{%``, ``>–<``).
                alone = re.search(rf"(%}}|>)\s*{glyph}\s*({{%|<)", text) is not None
                if quoted or alone:
                    found.append(f"{path.relative_to(PACKAGE)}:{line}")
    assert not found, "write formats.numbers.NONE instead of a dash: " + ", ".join(found)
