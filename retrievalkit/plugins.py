"""Plugin discovery in three plain steps: find (metadata only), load (stevedore), use.

*find* reads entry points from package metadata without importing anything, so
``retrievalkit list`` and ``--help`` stay fast. *load* imports one plugin (or all of a
group) through stevedore and turns an import failure into a :class:`PluginError`
that names the package and entry point. A broken plugin never stops the others.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from retrievalkit.errors import InputError, PluginError

if TYPE_CHECKING:
    from retrievalkit.model import GoldenQuestionSet

QUESTION_SETS = "retrievalkit.question_sets"
RETRIEVERS = "retrievalkit.retrievers"
STORES = "retrievalkit.stores"
GROUPS = (QUESTION_SETS, RETRIEVERS, STORES)


@runtime_checkable
class QuestionSetProvider(Protocol):
    """What a ``retrievalkit.question_sets`` entry point gives (directly, or when called)."""

    def set_names(self) -> Sequence[str]: ...

    def load(self, name: str) -> GoldenQuestionSet: ...


@attrs.frozen(order=True)
class Plugin:
    """One entry point as found in metadata: nothing imported yet."""

    group: str
    name: str
    value: str
    package: str
    version: str

    @property
    def label(self) -> str:
        """``package[name]``, how messages name a plugin."""
        return f"{self.package}[{self.name}]"


@attrs.frozen
class BrokenPlugin:
    plugin: Plugin
    error: str


def find(group: str) -> list[Plugin]:
    """Every entry point of ``group``, sorted, duplicates of one installation folded."""
    found: set[Plugin] = set()
    for entry_point in importlib.metadata.entry_points(group=group):
        dist = getattr(entry_point, "dist", None)
        package = dist.metadata["Name"] if dist is not None else "?"
        version = dist.version if dist is not None else "?"
        found.add(Plugin(group, entry_point.name, entry_point.value, package, version))
    return sorted(found)


def find_one(group: str, name: str) -> Plugin:
    """The plugin called ``name``; an error lists what is installed when there is none."""
    matches = [plugin for plugin in find(group) if plugin.name == name]
    if not matches:
        known = ", ".join(plugin.name for plugin in find(group)) or "none"
        kind = group.rsplit(".", 1)[-1].replace("_", " ").rstrip("s")
        raise PluginError(
            f"unknown {kind} plugin '{name}' (installed: {known}); "
            "check the spelling, or pip install the package that provides it"
        )
    packages = {plugin.package for plugin in matches}
    if len(packages) > 1:
        raise PluginError(
            f"plugin name '{name}' in {group} is registered by more than one package: "
            + ", ".join(sorted(plugin.label for plugin in matches))
            + "; uninstall one of them"
        )
    return matches[0]


def load(plugin: Plugin) -> Any:
    """Import the object behind an entry point, through stevedore."""
    from stevedore import NamedExtensionManager

    failures: list[BaseException] = []

    def on_failure(_manager: Any, _entry_point: Any, error: BaseException) -> None:
        failures.append(error)

    manager = NamedExtensionManager(
        namespace=plugin.group,
        names=[plugin.name],
        on_load_failure_callback=on_failure,
        invoke_on_load=False,
    )
    for extension in manager.extensions:
        if extension.entry_point.value == plugin.value:
            return extension.plugin
    error = failures[0] if failures else LookupError("entry point vanished")
    raise PluginError(
        f"plugin {plugin.label} ({plugin.value}) failed to load: "
        f"{type(error).__name__}: {error}; reinstall or fix that package"
    )


def load_group(group: str) -> tuple[dict[str, tuple[Plugin, Any]], list[BrokenPlugin]]:
    """Every plugin of a group that loads, and the broken ones with their errors."""
    loaded: dict[str, tuple[Plugin, Any]] = {}
    broken: list[BrokenPlugin] = []
    for plugin in find(group):
        try:
            loaded.setdefault(plugin.name, (plugin, load(plugin)))
        except PluginError as error:
            broken.append(BrokenPlugin(plugin, str(error)))
    return loaded, broken


def as_provider(plugin: Plugin, obj: Any) -> QuestionSetProvider:
    """A provider from what an entry point gives: a provider, or a callable making one."""
    provider = obj
    if not isinstance(provider, QuestionSetProvider) or isinstance(provider, type):
        try:
            provider = obj()
        except Exception as error:
            raise PluginError(
                f"question set provider {plugin.label} failed to start: "
                f"{type(error).__name__}: {error}"
            ) from error
    if not isinstance(provider, QuestionSetProvider):
        raise PluginError(
            f"question set provider {plugin.label} has no set_names()/load(name); "
            "see the plugin author guide"
        )
    return provider


@attrs.frozen
class SetCatalogue:
    """Which provider offers which set name, and which providers are broken."""

    offers: dict[str, tuple[Plugin, QuestionSetProvider]]
    broken: list[BrokenPlugin]


def set_catalogue() -> SetCatalogue:
    """Load every question-set provider and index its set names; two owners is an error."""
    loaded, broken = load_group(QUESTION_SETS)
    offers: dict[str, tuple[Plugin, QuestionSetProvider]] = {}
    for plugin, obj in loaded.values():
        try:
            provider = as_provider(plugin, obj)
            names = list(provider.set_names())
        except Exception as error:
            broken.append(BrokenPlugin(plugin, str(error)))
            continue
        for set_name in names:
            if set_name in offers:
                other = offers[set_name][0]
                raise PluginError(
                    f"question set '{set_name}' is offered by two providers: {other.label} "
                    f"and {plugin.label}; uninstall one, or load the set from a file"
                )
            offers[set_name] = (plugin, provider)
    return SetCatalogue(offers, broken)


def create_retriever(plugin_name: str, options: dict[str, Any], *, instance: str) -> Any:
    """Call a retriever factory with its options; a wrong option names the plugin."""
    plugin = find_one(RETRIEVERS, plugin_name)
    factory = load(plugin)
    try:
        return factory(**options)
    except TypeError as error:
        if "argument" in str(error):
            raise InputError(
                f"retriever plugin '{plugin_name}' does not accept these options: {error}",
                source=f"[retrievers.{instance}]",
                hint="check the plugin's documented options",
            ) from None
        raise
    except InputError as error:
        error.source = error.source or f"[retrievers.{instance}] (plugin '{plugin_name}')"
        raise InputError(
            error.detail, source=error.source, line=error.line, field=error.field, hint=error.hint
        ) from None
