"""A plugin whose dependency is not installed: one line naming what to install (exit code 2).

A framework adapter (``retrievalkit-haystack``, ``-qdrant``, ``-chroma``, ``-langchain``,
``-llamaindex``) imports its framework when it is loaded or when its factory or command
runs. When that import fails with `ModuleNotFoundError` (or an `ImportError` from an installed
version that lacks what the adapter imports), every path that loads or calls a
plugin (`retrievalkit.plugins.registry.load`, `retrievalkit.plugins.factories.create_plugin`
and the command line's plugin commands) turns it into a `PluginError` built here: it names
the plugin, its package, the missing module and the requirement of that package that
provides it, read from the package's own metadata (``Requires-Dist``), so that every
adapter, and any third-party plugin, says the same thing without code of its own:

    retriever plugin 'haystack' (package retrievalkit-haystack 0.1.0) needs the module
    'haystack', which is not installed: pip install 'haystack-ai>=2.8'

A requirement behind an extra of the package (``; extra == "dense"``) is named as that
extra: ``pip install 'retrievalkit-eval[dense]'``.
"""

from __future__ import annotations

import re
from typing import Protocol

from retrievalkit.errors import PluginError


class Plugin(Protocol):
    """What this module reads of a discovered plugin (`retrievalkit.plugins.registry.Plugin`)."""

    @property
    def name(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def package(self) -> str: ...
    @property
    def version(self) -> str: ...


_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
_MISSING = re.compile(r"No module named '([^']+)'")


def missing_module(error: BaseException) -> str | None:
    """The top-level module a `ModuleNotFoundError` says is missing, or that an
    `ImportError` could not import from (an incompatible version); None for any other
    error, or when it names none."""
    if not isinstance(error, ImportError):
        return None
    name = error.name
    if not name:
        found = _MISSING.search(str(error))
        name = found.group(1) if found else None
    return name.split(".")[0] if name else None


def _squashed(name: str) -> str:
    return re.sub(r"[-_.]+", "", name).lower()


def install_hint(package: str, module: str) -> str:
    """What to ``pip install`` so that ``module`` can be imported, from the requirements
    of the installed distribution ``package``: the requirement whose name matches the
    module (``haystack`` is provided by ``haystack-ai``, ``qdrant_client`` by
    ``qdrant-client``), as the extra it sits behind when it does; else the package
    reinstalled with its dependencies."""
    import importlib.metadata

    try:
        requires = importlib.metadata.requires(package) or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    wanted = _squashed(module)
    for requirement in requires:
        spec, _, marker = requirement.partition(";")
        named = _NAME.match(spec)
        if named is None:
            continue
        name = _squashed(named.group(1))
        if name == wanted or name.startswith(wanted) or wanted.startswith(name):
            extra = _EXTRA.search(marker)
            if extra is not None:
                return f"pip install '{package}[{extra.group(1)}]'"
            return f"pip install '{spec.strip()}'"
    return (
        f"pip install the package that provides '{module}', or reinstall {package} with "
        f"its dependencies (pip install --force-reinstall '{package}')"
    )


def missing_dependency(error: BaseException, plugin: Plugin, kind: str) -> PluginError | None:
    """The `PluginError` for ``error`` when it is a module ``plugin`` needs and cannot
    import (None for any other error, and for a module of the plugin's own package, which
    is a broken installation rather than a missing dependency)."""
    module = missing_module(error)
    if module is None:
        return None
    own = plugin.value.partition(":")[0].split(".")[0]
    if module == own:
        return None
    hint = install_hint(plugin.package, module)
    if isinstance(error, ModuleNotFoundError):
        state = "which is not installed"
    else:  # installed, but not a version that has what the plugin imports
        state = f"which cannot be imported ({error}); install a version it works with"
    return PluginError(
        f"{kind} plugin '{plugin.name}' (package {plugin.package} {plugin.version}) needs the "
        f"module '{module}', {state}: {hint}"
    )
