"""The shape of the package: plugins use only the declared interface, and it all resolves."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import retrievalkit.plugin_api as plugin_api

ROOT = Path(__file__).resolve().parent.parent
#: What a plugin package may import of retrievalkit (DESIGN.md, "Contracts added in 0.3").
DECLARED = {"retrievalkit", "retrievalkit.testing", "retrievalkit.plugin_api"}
PLUGIN_CODE = sorted(
    path
    for folder in (ROOT / "plugins").iterdir()
    if (folder / "pyproject.toml").is_file()
    for path in folder.rglob("*.py")
    if "tests" not in path.relative_to(folder).parts and "build" not in path.parts
)


def _retrievalkit_imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [
            (node.lineno, name)
            for name in names
            if name == "retrievalkit" or name.startswith("retrievalkit.")
        ]
    return found


def test_the_plugin_packages_are_found() -> None:
    packages = {path.relative_to(ROOT / "plugins").parts[0] for path in PLUGIN_CODE}
    assert {"retrievalkit-elasticsearch", "retrievalkit-postgres", "retrievalkit-example"} <= (
        packages
    )


@pytest.mark.parametrize("path", PLUGIN_CODE, ids=lambda path: str(path.relative_to(ROOT)))
def test_plugins_import_only_the_declared_interface(path: Path) -> None:
    undeclared = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for line, name in _retrievalkit_imports(path)
        if name not in DECLARED
    ]
    assert not undeclared, "import these names from retrievalkit.plugin_api instead"


def test_the_checker_sees_an_internal_import(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from retrievalkit.stores.serialization import dump_record\n")
    assert _retrievalkit_imports(module) == [(2, "retrievalkit.stores.serialization")]


@pytest.mark.parametrize("name", plugin_api.__all__)
def test_every_promised_name_resolves(name: str) -> None:
    value = getattr(plugin_api, name)
    home = importlib.import_module(plugin_api._EXPORTS[name])
    assert value is getattr(home, name)


def test_an_unpromised_name_says_what_is_promised() -> None:
    with pytest.raises(AttributeError, match=r"promised: .*InputError"):
        plugin_api.outcomes_codec  # noqa: B018


PACKAGE = ROOT / "retrievalkit"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(*, typing: bool = True) -> dict[str, set[str]]:
    """Module -> the retrievalkit modules it imports: at its top, inside a function, and
    (with ``typing``) under ``if TYPE_CHECKING``, which a reader follows as well."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        typing_only = {
            id(node)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and getattr(block.test, "id", "") == "TYPE_CHECKING"
            for node in ast.walk(block)
        }
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only and not typing:
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [
                    f"{node.module}.{alias.name}"
                    if f"{node.module}.{alias.name}" in modules
                    else node.module
                    for alias in node.names
                ]
            else:
                continue
            for name in names:
                target = known(name) if name.startswith("retrievalkit") else None
                if target is not None and target != module:
                    targets.add(target)
        graph[module] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


@pytest.mark.parametrize("typing", [False, True], ids=["at run time", "types included"])
def test_no_module_of_retrievalkit_imports_itself_through_others(typing: bool) -> None:
    graph = _import_graph(typing=typing)
    assert len(graph) > 80, "the walk found the package's modules"
    assert not _cycles(graph), "import cycles: " + "; ".join(
        " -> ".join(group) for group in _cycles(graph)
    )


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# --- layers: each package imports only those below it ---------------------------------

#: Bottom to top. A module may import its own layer and those below it, never above:
#: formats and metrics below pipeline, pipeline below the API, render and serve on top
#: (the command line over everything).
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "_version", "redaction", "usage", "model", "formats", "stats", "metrics"}),
    frozenset(
        {
            "plugins.registry",
            "plugins._metadata",
            "plugins._loading",
            "plugins.factories",
            "plugins.missing",
            "stores",
            "embedders",
            "demo",
        }
    ),
    frozenset(
        {"plugins", "corpora", "pipeline", "retrievers", "rerankers", "generators", "judges"}
    ),
    frozenset({"api", "api_arguments", "plugin_api"}),
    frozenset({"render"}),
    frozenset({"serve", "cli", "testing", "__main__", "__init__"}),
)

#: The only imports that point upwards, each inside a method and for a reason.
UPWARD_ALLOWED = {
    ("retrievalkit.pipeline.engine.run", "retrievalkit.render.markdown"): "Run.to_markdown()",
    ("retrievalkit.pipeline.engine.run", "retrievalkit.render.report_files"): "Run.write_report()",
    ("retrievalkit.pipeline.engine.run", "retrievalkit.render.summary"): "a notebook shows a Run",
    ("retrievalkit.pipeline.gating.comparison", "retrievalkit.render.comparison"): (
        "Comparison.to_markdown() and printing a Comparison"
    ),
}


def _layer(module: str) -> int:
    """The layer of a module: its own entry (``plugins.registry``), else its package's."""
    parts = module.split(".")[1:] or ["__init__"]
    for size in range(len(parts), 0, -1):
        name = ".".join(parts[:size])
        for height, layer in enumerate(LAYERS):
            if name in layer:
                return height
    raise AssertionError(f"{module}: neither it nor its package is in a layer; add it to LAYERS")


def _upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted(
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if _layer(target) > _layer(module)
    )


def test_every_import_points_down_the_layers() -> None:
    upward = _upward_imports(_import_graph(typing=False))
    unexplained = [pair for pair in upward if pair not in UPWARD_ALLOWED]
    assert not unexplained, "imports that point up the layers: " + "; ".join(
        f"{module} -> {target}" for module, target in unexplained
    )
    stale = sorted(set(UPWARD_ALLOWED) - set(upward))
    assert not stale, f"allowed upward imports no longer made (remove them): {stale}"


def test_the_layer_check_sees_an_upward_import() -> None:
    graph = {"retrievalkit.metrics.scoring": {"retrievalkit.pipeline.engine.run"}}
    assert _upward_imports(graph) == [
        ("retrievalkit.metrics.scoring", "retrievalkit.pipeline.engine.run")
    ]
    assert _upward_imports({"retrievalkit.api": {"retrievalkit.metrics.scoring"}}) == []


def _private_imports(path: Path) -> list[str]:
    """``from retrievalkit.X import _name``: a name private to another module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("retrievalkit"):
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]
    return found


def test_no_module_imports_a_name_private_to_another() -> None:
    paths = [*PACKAGE.rglob("*.py"), *PLUGIN_CODE]
    found = [entry for path in paths for entry in _private_imports(path)]
    assert not found, "private names imported across modules: " + "; ".join(found)


def test_the_private_import_check_sees_one(tmp_path: Path) -> None:
    module = ROOT / "tests" / "fixtures" / "_private_import_probe.py"
    module.write_text("from retrievalkit.pipeline.engine.run import _hidden\n", encoding="utf-8")
    try:
        assert _private_imports(module) == [
            "tests/fixtures/_private_import_probe.py:1: retrievalkit.pipeline.engine.run._hidden"
        ]
    finally:
        module.unlink()
