"""The Python API page renders real docstrings: Markdown, no Sphinx roles shown literally."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parents[1] / "docs" / "api.md"
#: What mkdocstrings would print as-is: `:class:`X``, `:mod:`y``, `:func:`z`` ...
ROLE = re.compile(r":(?:py:)?(?:class|mod|func|data|meth|attr|exc|obj|const):`")


def documented_modules() -> list[str]:
    names = re.findall(r"^::: ([\w.]+)", PAGE.read_text(encoding="utf-8"), re.M)
    assert names, "the API page renders no module"
    return names


def docstrings(module: Any) -> Iterator[tuple[str, str]]:
    """The docstrings mkdocstrings renders: the module's and its public members'."""
    yield module.__name__, inspect.getdoc(module) or ""
    for name, member in vars(module).items():
        if name.startswith("_") or getattr(member, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(member) or inspect.isfunction(member):
            yield f"{module.__name__}.{name}", inspect.getdoc(member) or ""
        if inspect.isclass(member):
            for attribute, value in vars(member).items():
                if not attribute.startswith("_") and inspect.isfunction(value):
                    yield f"{module.__name__}.{name}.{attribute}", inspect.getdoc(value) or ""


def test_the_api_page_has_no_sphinx_roles() -> None:
    found = [
        f"{where}: {line.strip()}"
        for module in documented_modules()
        for where, text in docstrings(importlib.import_module(module))
        for line in text.splitlines()
        if ROLE.search(line)
    ]
    assert not found, "Sphinx roles render literally on the API page:\n" + "\n".join(found)


def test_every_documented_module_says_what_it_is_for() -> None:
    for name in documented_modules():
        module = importlib.import_module(name)
        assert (inspect.getdoc(module) or "").strip(), f"{name} has no module docstring"
