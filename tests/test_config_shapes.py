"""Generated configurations of the wrong shape: each is one line naming the key, before
the first question, never a traceback and never a file silently ignored."""

from __future__ import annotations

import datetime as dt
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.formats.config import find_config

GENERATED = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value + '"'
    return "[" + ", ".join(toml_value(item) for item in value) + "]"


non_finite = st.sampled_from([math.nan, math.inf, -math.inf])
dates = st.one_of(
    st.dates(min_value=dt.date(1000, 1, 1)),
    st.datetimes(min_value=dt.datetime(1000, 1, 1)).map(lambda d: d.replace(microsecond=0)),
    st.times().map(lambda t: t.replace(microsecond=0)),
)
bad_scalar = st.one_of(non_finite, dates)
#: A bad value anywhere in an option: alone, in an array, or in an inline table.
bad_option = st.one_of(
    bad_scalar.map(toml_value),
    st.tuples(st.integers(0, 3), bad_scalar).map(
        lambda t: "[" + ", ".join(["1"] * t[0] + [toml_value(t[1])]) + "]"
    ),
    bad_scalar.map(lambda v: "{ inner = " + toml_value(v) + " }"),
)


@GENERATED
@given(
    section=st.sampled_from(["retrievers", "generators", "judges"]),
    option=st.sampled_from(["k1", "timeout", "b", "when", "deep"]),
    value=bad_option,
    pyproject=st.booleans(),
)
def test_non_finite_numbers_and_dates_as_plugin_options_are_refused_on_reading(
    tmp_path: Path, section: str, option: str, value: str, pyproject: bool
) -> None:
    prefix = "tool.retrievalkit." if pyproject else ""
    text = f'[{prefix}{section}.mine]\nplugin = "bm25"\n{option} = {value}\n'
    name = "pyproject.toml" if pyproject else "retrievalkit.toml"
    folder = tmp_path / f"c{abs(hash(text))}"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as refused:
        find_config(None, folder)
    assert refused.value.field is not None
    assert refused.value.field.startswith(f"{prefix}{section}.mine.{option}")
    assert refused.value.line == 3
    assert "\n" not in str(refused.value)


@GENERATED
@given(value=st.one_of(non_finite, dates), option=st.sampled_from(["k1", "b", "when"]))
def test_the_api_refuses_the_same_plugin_options_before_the_first_question(
    value: Any, option: str
) -> None:
    asked = []

    class Counting:
        identifier = "counting"

        def retrieve(self, question: str, limit: int) -> list[str]:
            asked.append(question)
            return []

    with pytest.raises(InputError) as refused:
        rk.evaluate("demo", "bm25", options={"corpus": "x", option: value}, git_commit=None)
    assert refused.value.field == f"options.{option}"
    assert asked == []


#: Values of the wrong shape for pyproject.toml's tool and tool.retrievalkit.
wrong_shape = st.one_of(
    st.integers(),
    st.booleans(),
    st.text(alphabet="abc xyz", max_size=5),
    st.lists(st.integers(), max_size=3),
)


@GENERATED
@given(
    value=wrong_shape, where=st.sampled_from(["tool", "tool.retrievalkit"]), explicit=st.booleans()
)
def test_a_tool_table_of_the_wrong_shape_is_one_line(
    tmp_path: Path, value: Any, where: str, explicit: bool
) -> None:
    folder = tmp_path / f"p{abs(hash((repr(value), where, explicit)))}"
    folder.mkdir(exist_ok=True)
    if where == "tool":
        text = f"tool = {toml_value(value)}\n"
    else:
        text = f"[tool]\nretrievalkit = {toml_value(value)}\n"
    path = folder / "pyproject.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as refused:
        find_config(str(path) if explicit else None, folder)
    assert refused.value.field == where and refused.value.source == str(path)
    assert "must be a table" in refused.value.detail


@pytest.mark.parametrize("name", ["retrievalkit.toml", "pyproject.toml"])
@pytest.mark.parametrize("kind", ["dangling link", "folder", "link to a folder", "link loop"])
def test_a_configuration_that_is_not_a_file_is_an_error_not_ignored(
    tmp_path: Path, name: str, kind: str
) -> None:
    path = tmp_path / name
    if kind == "dangling link":
        path.symlink_to(tmp_path / "nowhere.toml")
    elif kind == "folder":
        path.mkdir()
    elif kind == "link to a folder":
        (tmp_path / "real").mkdir()
        path.symlink_to(tmp_path / "real")
    else:
        os.symlink(path, path)
    with pytest.raises(InputError) as refused:
        find_config(None, tmp_path)
    assert refused.value.source == str(path)


def test_other_tools_tables_in_pyproject_are_not_retrievalkits_business(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.other]\nx = nan\nwhen = 2024-01-01\n", encoding="utf-8"
    )
    assert find_config(None, tmp_path).retrievers == {}
