"""Plugin discovery in three plain steps: find (metadata only), load (stevedore), use.

*find* reads entry points from package metadata without importing anything, so
``retrievalkit list`` and ``--help`` stay fast; each `Plugin` keeps the package and version
it was found in. *load* hands the entry point to stevedore (a `DriverManager` for one
plugin, an `ExtensionManager` for several, in `retrievalkit.plugins._loading`), whose
load-failure callback turns any failure into a `PluginError` that names the package and
entry point, with the original exception chained. A broken plugin never stops the others.

When two packages register one name in a group, a built-in (an entry point into
retrievalkit itself) wins, and the collision is shown by ``retrievalkit list`` with
both packages; between two third-party packages the name is ambiguous, and using it
is an error that names both. Only the plugin chosen is ever handed to stevedore.

This module is imported by every start of the command line, so it imports neither
attrs nor `importlib.metadata` (which brings the email and zipfile packages) nor
stevedore (which imports it): plain folders on ``sys.path`` are read directly, as
`importlib.metadata` reads them, and anything else (a zip file or an egg on the path, a
finder of installed distributions other than Python's own) falls back to
`importlib.metadata` itself.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from retrievalkit.errors import PluginError
from retrievalkit.plugins._metadata import distributions

if TYPE_CHECKING:
    import importlib.metadata

    from retrievalkit.model.values import GoldenQuestionSet

QUESTION_SETS = "retrievalkit.question_sets"
RETRIEVERS = "retrievalkit.retrievers"
STORES = "retrievalkit.stores"
EMBEDDERS = "retrievalkit.embedders"
RERANKERS = "retrievalkit.rerankers"
CORPORA = "retrievalkit.corpora"
GENERATORS = "retrievalkit.generators"
JUDGES = "retrievalkit.judges"
COMMANDS = "retrievalkit.commands"
#: Not a plugin group: the set names a package's question-set provider offers, declared in
#: its metadata (``NAME = "<the provider's entry point>"``), so that ``retrievalkit list``
#: can show them without importing the provider. ``list --check`` compares the two.
SET_NAMES = "retrievalkit.set_names"

#: Every entry-point group retrievalkit reads, with what its entry points give, in the
#: order ``retrievalkit list`` shows them.
GROUPS: Mapping[str, str] = {
    QUESTION_SETS: "providers of named golden question sets (set_names() and load(name))",
    RETRIEVERS: "retriever factories, called with the options of a [retrievers.NAME]",
    STORES: "result stores, named by URL scheme, called with the store URL",
    EMBEDDERS: "text embedders (text to float32 vectors), for dense retrievers",
    RERANKERS: "rerankers, used by the rerank retriever",
    CORPORA: "document collections for indexing and question generation",
    GENERATORS: "synthetic question generators (retrievalkit generate)",
    JUDGES: "relevance judges (retrievalkit judge)",
    COMMANDS: "subcommands of the retrievalkit command (HELP, configure, run)",
}
#: The import package of retrievalkit itself: an entry point into it is a built-in.
_CORE = __name__.partition(".")[0]

log = logging.getLogger(__name__)


@runtime_checkable
class QuestionSetProvider(Protocol):
    """What a ``retrievalkit.question_sets`` entry point gives (directly, or when called)."""

    def set_names(self) -> Sequence[str]: ...

    def load(self, name: str) -> GoldenQuestionSet: ...


class _Value:
    """An immutable value compared field by field (attrs' ``frozen``, without attrs)."""

    __slots__: tuple[str, ...] = ()
    _fields: tuple[str, ...] = ()

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, field) for field in self._fields)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{field}={getattr(self, field)!r}" for field in self._fields)
        return f"{type(self).__name__}({fields})"


def _set(instance: _Value, /, **fields: Any) -> None:
    for field, given in fields.items():
        object.__setattr__(instance, field, given)


class Plugin(_Value):
    """One entry point as found in metadata: nothing imported yet."""

    __slots__ = ("_entry_point", "group", "name", "package", "value", "version")
    _fields = ("group", "name", "value", "package", "version")
    group: str
    name: str
    value: str
    package: str
    version: str
    _entry_point: importlib.metadata.EntryPoint | None

    def __init__(
        self,
        group: str,
        name: str,
        value: str,
        package: str,
        version: str,
        entry_point: importlib.metadata.EntryPoint | None = None,
    ) -> None:
        _set(self, group=group, name=name, value=value, package=package, version=version)
        _set(self, _entry_point=entry_point)

    @property
    def entry_point(self) -> importlib.metadata.EntryPoint:
        """The entry point itself (made on first use: finding a plugin never needs it)."""
        point: importlib.metadata.EntryPoint | None = self._entry_point
        if point is None:
            import importlib.metadata

            point = importlib.metadata.EntryPoint(
                name=self.name, value=self.value, group=self.group
            )
            _set(self, _entry_point=point)
        return point

    def __lt__(self, other: Plugin) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() < other._key()

    def __le__(self, other: Plugin) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() <= other._key()

    def __gt__(self, other: Plugin) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() > other._key()

    def __ge__(self, other: Plugin) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() >= other._key()

    @property
    def label(self) -> str:
        """``package[name]``, how messages name a plugin."""
        return f"{self.package}[{self.name}]"

    @property
    def builtin(self) -> bool:
        """True for retrievalkit's own plugins, which win any name collision."""
        module = self.value.partition(":")[0].strip()
        return module.partition(".")[0] == _CORE


class BrokenPlugin(_Value):
    __slots__ = ("error", "plugin")
    _fields = ("plugin", "error")
    plugin: Plugin
    error: str

    def __init__(self, plugin: Plugin, error: str) -> None:
        _set(self, plugin=plugin, error=error)


class Collision(_Value):
    """Two or more packages registering one name in one group."""

    __slots__ = ("chosen", "group", "name", "plugins")
    _fields = ("group", "name", "chosen", "plugins")
    group: str
    name: str
    chosen: Plugin | None
    """The built-in that wins, or None when no package wins (using the name is an error)."""
    plugins: tuple[Plugin, ...]
    """Every registration of the name, the chosen one first."""

    def __init__(
        self, group: str, name: str, chosen: Plugin | None, plugins: tuple[Plugin, ...]
    ) -> None:
        _set(self, group=group, name=name, chosen=chosen, plugins=plugins)

    def describe(self) -> str:
        labels = " and ".join(plugin.label for plugin in self.plugins)
        if self.chosen is not None:
            return (
                f"'{self.name}' is registered by {labels}; the built-in {self.chosen.label} is used"
            )
        return f"'{self.name}' is registered by {labels}; uninstall one of them to use it"


def find(group: str) -> list[Plugin]:
    """Every entry point of ``group``, sorted, duplicates of one installation folded."""
    return list(_installed(_path_state()).get(group, ()))


def _path_state() -> tuple[tuple[str, float], ...]:
    """sys.path with each folder's modification time: installing a package changes it."""
    state = []
    for entry in sys.path:
        try:
            modified = os.stat(entry or ".").st_mtime
        except OSError:
            modified = -1.0
        state.append((entry, modified))
    return tuple(state)


@functools.lru_cache(maxsize=8)
def _installed(path_state: tuple[tuple[str, float], ...]) -> dict[str, tuple[Plugin, ...]]:
    """Every retrievalkit entry point installed, by group, from one pass over the packages.

    A command asks for several groups, and each ``entry_points()`` call reads every
    installed package's entry points again, so one pass is kept per state of sys.path.
    Only a package that registers a retrievalkit entry point has its metadata read
    (for its name and version); the first installation of a name wins, as in
    ``importlib.metadata.entry_points()``.
    """
    found: dict[str, dict[tuple[str, str], Plugin]] = {}
    seen: set[str] = set()
    for package, version, points in distributions(path_state):
        normalized = re.sub(r"[-_.]+", "-", package).lower()
        if normalized in seen:
            continue
        seen.add(normalized)
        for group, name, value, point in points:
            plugin = Plugin(group, name, value, package, version, point)
            found.setdefault(group, {}).setdefault((name, value), plugin)
    return {group: tuple(sorted(plugins.values())) for group, plugins in found.items()}


def registered(group: str) -> tuple[dict[str, Plugin], list[Collision]]:
    """Each name of ``group`` with the plugin it means, and the names several packages claim.

    A built-in wins a collision; a name claimed only by several third-party packages
    is left out of the mapping (its collision has no ``chosen`` plugin).
    """
    by_name: dict[str, list[Plugin]] = {}
    for plugin in find(group):
        by_name.setdefault(plugin.name, []).append(plugin)
    chosen: dict[str, Plugin] = {}
    collisions: list[Collision] = []
    for name, candidates in sorted(by_name.items()):
        if len({plugin.package for plugin in candidates}) == 1:
            chosen[name] = candidates[0]
            continue
        builtins = [plugin for plugin in candidates if plugin.builtin]
        winner = builtins[0] if builtins else None
        others = tuple(plugin for plugin in candidates if plugin is not winner)
        if winner is not None:
            chosen[name] = winner
            log.info(
                "%s is registered by %s too; the built-in is used",
                winner.label,
                ", ".join(plugin.label for plugin in others),
            )
        collisions.append(Collision(group, name, winner, (winner, *others) if winner else others))
    return chosen, collisions


def names(group: str) -> list[str]:
    """Every name of ``group`` (including ambiguous ones), sorted."""
    return sorted({plugin.name for plugin in find(group)})


def find_one(group: str, name: str) -> Plugin:
    """The plugin called ``name``; an error lists what is installed when there is none,
    and names both packages when two third-party packages claim the name."""
    chosen, collisions = registered(group)
    if name in chosen:
        return chosen[name]
    for collision in collisions:
        if collision.name == name:
            raise PluginError(f"plugin name {collision.describe()} (group {group})")
    known = ", ".join(names(group)) or "none"
    kind = _kind(group)
    raise PluginError(
        f"unknown {kind} plugin '{name}' (installed: {known}); "
        "check the spelling, or pip install the package that provides it"
    )


def load(plugin: Plugin) -> Any:
    """Import the object behind an entry point, through a stevedore `DriverManager`.

    Any failure becomes a `PluginError` naming the package and entry point,
    with the original exception chained (``__cause__``) for the traceback.
    """
    from retrievalkit.plugins._loading import load_one

    try:
        obj = load_one(plugin.group, plugin.name, plugin.value)
    except Exception as error:
        raise load_error(plugin, error) from error
    log.info("loaded plugin %s = %s (%s)", plugin.label, plugin.value, plugin.version)
    return obj


def load_all(plugins: Sequence[Plugin]) -> list[tuple[Plugin, Any, PluginError | None]]:
    """Import every plugin of ``plugins``, through one stevedore `ExtensionManager` per
    group; in order, each plugin with its object, or with the `PluginError` (the original
    exception chained) that its failure became in the manager's load-failure callback."""
    if not plugins:
        return []
    from retrievalkit.plugins._loading import load_each

    by_group: dict[str, list[Plugin]] = {}
    for plugin in plugins:
        by_group.setdefault(plugin.group, []).append(plugin)
    outcome: dict[int, tuple[Any, PluginError | None]] = {}
    for group, members in by_group.items():
        points = [(plugin.name, plugin.value) for plugin in members]
        for plugin, (obj, error) in zip(members, load_each(group, points), strict=True):
            if error is None:
                log.info("loaded plugin %s = %s (%s)", plugin.label, plugin.value, plugin.version)
                outcome[id(plugin)] = (obj, None)
            else:
                failure = load_error(plugin, error)
                failure.__cause__ = error
                outcome[id(plugin)] = (None, failure)
    return [(plugin, *outcome[id(plugin)]) for plugin in plugins]


def load_error(plugin: Plugin, error: BaseException) -> PluginError:
    """What a plugin that cannot be imported is reported as: the module to install when a
    dependency is missing, else its package and entry point, the error, and what to do."""
    from retrievalkit.plugins.missing import missing_dependency

    missing = missing_dependency(error, plugin, _kind(plugin.group))
    if missing is not None:
        return missing
    return PluginError(
        f"plugin {plugin.label} ({plugin.value}) failed to load: "
        f"{type(error).__name__}: {error}; reinstall or fix that package"
    )


def _kind(group: str) -> str:
    """What a plugin of ``group`` is called in messages (``retriever``, ``command``)."""
    return group.rsplit(".", 1)[-1].replace("_", " ").rstrip("s")


def load_group(group: str) -> tuple[dict[str, tuple[Plugin, Any]], list[BrokenPlugin]]:
    """Every plugin of a group that loads (built-ins winning collisions), and the broken
    ones with their errors; ambiguous names are left out."""
    loaded: dict[str, tuple[Plugin, Any]] = {}
    broken: list[BrokenPlugin] = []
    chosen, _ = registered(group)
    for plugin, obj, error in load_all(list(chosen.values())):
        if error is None:
            loaded[plugin.name] = (plugin, obj)
        else:
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


def as_command(plugin: Plugin, obj: Any) -> Any:
    """The command an entry point gives: anything with ``HELP``, ``configure`` and ``run``."""
    missing = [name for name in ("HELP", "configure", "run") if not hasattr(obj, name)]
    if missing:
        raise PluginError(
            f"command plugin {plugin.label} lacks {', '.join(missing)}; a command has "
            "HELP, configure(parser) and run(args)"
        )
    return obj


_Provider = TypeVar("_Provider")


class SetCatalogue(Generic[_Provider]):
    """Which provider offers which set name, which providers are broken, and which set
    names more than one package offers."""

    def __init__(
        self,
        offers: dict[str, tuple[Plugin, _Provider]],
        broken: list[BrokenPlugin],
        collisions: list[Collision] | None = None,
        misdeclared: list[BrokenPlugin] | None = None,
    ) -> None:
        self.offers = offers
        self.broken = broken
        self.collisions: list[Collision] = collisions or []
        """Set names offered by several packages: a built-in's wins; otherwise the name is
        left out of ``offers`` and loading it is an error naming both providers."""
        self.misdeclared: list[BrokenPlugin] = misdeclared or []
        """Providers whose package declares other set names (`SET_NAMES`) than they offer."""

    def ambiguous(self, name: str) -> Collision | None:
        """The collision that makes ``name`` unusable, if any."""
        for collision in self.collisions:
            if collision.name == name and collision.chosen is None:
                return collision
        return None


def declared_set_names(plugin: Plugin) -> list[str] | None:
    """The set names the package of provider ``plugin`` declares for it in its metadata
    (the `SET_NAMES` group), or None when it declares none."""
    reference = "".join(plugin.value.split())
    names = [
        declared.name
        for declared in find(SET_NAMES)
        if declared.package == plugin.package and "".join(declared.value.split()) == reference
    ]
    return sorted(set(names)) or None


def set_catalogue() -> SetCatalogue[QuestionSetProvider]:
    """Load every question-set provider and index its set names.

    Two packages offering one set name never break the others' sets: a built-in's set
    wins, and a name two third-party packages offer is unusable until one is removed.
    """
    entries: list[tuple[Plugin, QuestionSetProvider, list[str]]] = []
    broken: list[BrokenPlugin] = []
    misdeclared: list[BrokenPlugin] = []
    # Every provider, not load_group's one per entry-point name: a second package whose
    # provider has the same entry-point name may offer other sets, or the same ones.
    for plugin, obj, failure in load_all(find(QUESTION_SETS)):
        try:
            if failure is not None:
                raise failure
            provider = as_provider(plugin, obj)
            set_names = list(provider.set_names())
        except Exception as error:
            broken.append(BrokenPlugin(plugin, str(error)))
            continue
        entries.append((plugin, provider, set_names))
        declared = declared_set_names(plugin)
        if declared is not None and declared != sorted(set(set_names)):
            misdeclared.append(
                BrokenPlugin(
                    plugin,
                    f"its package declares the sets {', '.join(declared)} in its metadata "
                    f"({SET_NAMES}) but the provider offers "
                    f"{', '.join(sorted(set(set_names))) or 'none'}; update the "
                    f"package's {SET_NAMES} entry points and reinstall it",
                )
            )
    return _catalogue(entries, broken, misdeclared)


def listed_sets() -> SetCatalogue[QuestionSetProvider | None]:
    """The set catalogue as ``retrievalkit list`` shows it, importing as little as it can.

    A provider whose package declares its set names in metadata (`SET_NAMES`) is not
    imported (its provider is None here); any other provider is loaded and asked, as by
    `set_catalogue`.
    """
    entries: list[tuple[Plugin, QuestionSetProvider | None, list[str]]] = []
    broken: list[BrokenPlugin] = []
    providers = find(QUESTION_SETS)
    declared = {id(plugin): declared_set_names(plugin) for plugin in providers}
    undeclared = [plugin for plugin in providers if declared[id(plugin)] is None]
    # stevedore is imported only when a provider declares no set names.
    loaded = {id(plugin): (obj, failure) for plugin, obj, failure in load_all(undeclared)}
    for plugin in providers:
        offered = declared[id(plugin)]
        if offered is not None:
            entries.append((plugin, None, offered))
            continue
        obj, failure = loaded[id(plugin)]
        try:
            if failure is not None:
                raise failure
            provider = as_provider(plugin, obj)
            set_names = list(provider.set_names())
        except Exception as error:
            broken.append(BrokenPlugin(plugin, str(error)))
            continue
        entries.append((plugin, provider, set_names))
    return _catalogue(entries, broken, [])


def _catalogue(
    entries: list[tuple[Plugin, _Provider, list[str]]],
    broken: list[BrokenPlugin],
    misdeclared: list[BrokenPlugin],
) -> SetCatalogue[_Provider]:
    offered: dict[str, list[tuple[Plugin, _Provider]]] = {}
    for plugin, provider, set_names in entries:
        for set_name in dict.fromkeys(set_names):
            owners = offered.setdefault(set_name, [])
            if all(owner.package != plugin.package for owner, _ in owners):
                owners.append((plugin, provider))
    offers: dict[str, tuple[Plugin, _Provider]] = {}
    collisions: list[Collision] = []
    for set_name, owners in sorted(offered.items()):
        if len(owners) == 1:
            offers[set_name] = owners[0]
            continue
        builtins = [owner for owner in owners if owner[0].builtin]
        if builtins:
            offers[set_name] = builtins[0]
        winner = builtins[0][0] if builtins else None
        rest = tuple(owner for owner, _ in owners if owner is not winner)
        collisions.append(
            Collision(QUESTION_SETS, set_name, winner, (winner, *rest) if winner else rest)
        )
    return SetCatalogue(offers, broken, collisions, misdeclared)
