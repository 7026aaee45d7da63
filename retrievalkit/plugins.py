"""Plugin discovery in three plain steps, as flake8 does: find (metadata only), load, use.

*find* reads entry points from package metadata without importing anything, so
``retrievalkit list`` and ``--help`` stay fast; each `Plugin` keeps the entry
point it was found as. *load* imports that entry point directly and turns any failure
into a `PluginError` that names the package and entry point, with the original
exception chained. A broken plugin never stops the others.

When two packages register one name in a group, a built-in (an entry point into
retrievalkit itself) wins, and the collision is shown by ``retrievalkit list`` with
both packages; between two third-party packages the name is ambiguous, and using it
is an error that names both.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from retrievalkit.errors import InputError, PluginError

if TYPE_CHECKING:
    from retrievalkit.model import GoldenQuestionSet

QUESTION_SETS = "retrievalkit.question_sets"
RETRIEVERS = "retrievalkit.retrievers"
STORES = "retrievalkit.stores"
EMBEDDERS = "retrievalkit.embedders"
RERANKERS = "retrievalkit.rerankers"
CORPORA = "retrievalkit.corpora"
GENERATORS = "retrievalkit.generators"
JUDGES = "retrievalkit.judges"
COMMANDS = "retrievalkit.commands"

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
_PREFIX = "retrievalkit."
#: The import package of retrievalkit itself: an entry point into it is a built-in.
_CORE = __name__.partition(".")[0]

log = logging.getLogger(__name__)


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
    entry_point: importlib.metadata.EntryPoint = attrs.field(eq=False, order=False, repr=False)
    """The entry point itself, loaded directly by `load`."""

    @property
    def label(self) -> str:
        """``package[name]``, how messages name a plugin."""
        return f"{self.package}[{self.name}]"

    @property
    def builtin(self) -> bool:
        """True for retrievalkit's own plugins, which win any name collision."""
        module = self.value.partition(":")[0].strip()
        return module.partition(".")[0] == _CORE


@attrs.frozen
class BrokenPlugin:
    plugin: Plugin
    error: str


@attrs.frozen
class Collision:
    """Two or more packages registering one name in one group."""

    group: str
    name: str
    chosen: Plugin | None
    """The built-in that wins, or None when no package wins (using the name is an error)."""
    plugins: tuple[Plugin, ...]
    """Every registration of the name, the chosen one first."""

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
    Only a package that registers a retrievalkit entry point has its METADATA parsed
    (for its name and version); the first installation of a name wins, as in
    ``importlib.metadata.entry_points()``.
    """
    found: dict[str, dict[tuple[str, str], Plugin]] = {}
    seen: set[str] = set()
    for dist in importlib.metadata.distributions():
        points = [point for point in dist.entry_points if point.group.startswith(_PREFIX)]
        if not points:
            continue
        package = dist.metadata["Name"] or "?"
        normalized = re.sub(r"[-_.]+", "-", package).lower()
        if normalized in seen:
            continue
        seen.add(normalized)
        for point in points:
            plugin = Plugin(point.group, point.name, point.value, package, dist.version, point)
            found.setdefault(point.group, {}).setdefault((point.name, point.value), plugin)
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
    kind = group.rsplit(".", 1)[-1].replace("_", " ").rstrip("s")
    raise PluginError(
        f"unknown {kind} plugin '{name}' (installed: {known}); "
        "check the spelling, or pip install the package that provides it"
    )


def load(plugin: Plugin) -> Any:
    """Import the object behind an entry point.

    Any failure becomes a `PluginError` naming the package and entry point,
    with the original exception chained (``__cause__``) for the traceback.
    """
    try:
        obj = plugin.entry_point.load()
    except Exception as error:
        raise PluginError(
            f"plugin {plugin.label} ({plugin.value}) failed to load: "
            f"{type(error).__name__}: {error}; reinstall or fix that package"
        ) from error
    log.info("loaded plugin %s = %s (%s)", plugin.label, plugin.value, plugin.version)
    return obj


def load_group(group: str) -> tuple[dict[str, tuple[Plugin, Any]], list[BrokenPlugin]]:
    """Every plugin of a group that loads (built-ins winning collisions), and the broken
    ones with their errors; ambiguous names are left out."""
    loaded: dict[str, tuple[Plugin, Any]] = {}
    broken: list[BrokenPlugin] = []
    chosen, _ = registered(group)
    for name, plugin in chosen.items():
        try:
            loaded[name] = (plugin, load(plugin))
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


def as_command(plugin: Plugin, obj: Any) -> Any:
    """The command an entry point gives: anything with ``HELP``, ``configure`` and ``run``."""
    missing = [name for name in ("HELP", "configure", "run") if not hasattr(obj, name)]
    if missing:
        raise PluginError(
            f"command plugin {plugin.label} lacks {', '.join(missing)}; a command has "
            "HELP, configure(parser) and run(args)"
        )
    return obj


@attrs.frozen
class SetCatalogue:
    """Which provider offers which set name, which providers are broken, and which set
    names more than one package offers."""

    offers: dict[str, tuple[Plugin, QuestionSetProvider]]
    broken: list[BrokenPlugin]
    collisions: list[Collision] = attrs.field(factory=list)
    """Set names offered by several packages: a built-in's wins; otherwise the name is
    left out of ``offers`` and loading it is an error naming both providers."""

    def ambiguous(self, name: str) -> Collision | None:
        """The collision that makes ``name`` unusable, if any."""
        for collision in self.collisions:
            if collision.name == name and collision.chosen is None:
                return collision
        return None


def set_catalogue() -> SetCatalogue:
    """Load every question-set provider and index its set names.

    Two packages offering one set name never break the others' sets: a built-in's set
    wins, and a name two third-party packages offer is unusable until one is removed.
    """
    offered: dict[str, list[tuple[Plugin, QuestionSetProvider]]] = {}
    broken: list[BrokenPlugin] = []
    # Every provider, not load_group's one per entry-point name: a second package whose
    # provider has the same entry-point name may offer other sets, or the same ones.
    for plugin in find(QUESTION_SETS):
        try:
            provider = as_provider(plugin, load(plugin))
            set_names = list(provider.set_names())
        except Exception as error:
            broken.append(BrokenPlugin(plugin, str(error)))
            continue
        for set_name in dict.fromkeys(set_names):
            owners = offered.setdefault(set_name, [])
            if all(owner.package != plugin.package for owner, _ in owners):
                owners.append((plugin, provider))
    offers: dict[str, tuple[Plugin, QuestionSetProvider]] = {}
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
    return SetCatalogue(offers, broken, collisions)


def create_retriever(
    plugin_name: str, options: dict[str, Any], *, instance: str, config_file: str | None = None
) -> Any:
    """Call a retriever factory with its options; a wrong option names the plugin.

    With the config file the instance comes from, a message names that file, the line
    and the option (``retrievers.NAME.OPTION``). Secret option values never appear in a
    message, even when the plugin puts them in its own exception.
    """
    from retrievalkit.errors import EvaluationError
    from retrievalkit.redaction import remember, scrub, secret_values

    section = f"[retrievers.{instance}]"
    if config_file is not None:
        section = f"{config_file}, {section}"
    hidden = secret_values(options)
    remember(hidden)

    def place(option: str | None) -> dict[str, Any]:
        """Where an option of this instance is set: file, line and dotted key."""
        if config_file is None:
            return {"source": section, "field": option}
        from retrievalkit.config import key_line

        key = f"retrievers.{instance}" + (f".{option}" if option else "")
        return {"source": config_file, "line": key_line(config_file, key), "field": key}

    try:
        plugin = find_one(RETRIEVERS, plugin_name)
    except PluginError as error:
        if config_file is None:
            raise
        raise InputError(str(error), **place("plugin")) from None
    factory = load(plugin)
    try:
        return factory(**options)
    except TypeError as error:
        text = scrub(str(error), hidden)
        if "argument" in text:
            named = re.search(r"keyword argument '(\w+)'", text)
            option = named.group(1) if named and named.group(1) in options else None
            raise InputError(
                f"retriever plugin '{plugin_name}' does not accept these options: {text}",
                **place(option),
                hint=_option_hint(factory, option),
            ) from None
        raise EvaluationError(
            f"retriever '{instance}' (plugin '{plugin_name}') could not start: TypeError: {text}"
        ) from None
    except InputError as error:
        detail, hint = scrub(error.detail, hidden), scrub(error.hint or "", hidden) or None
        if error.source is None and error.field in options:
            where = place(error.field)
            raise InputError(
                f"{detail} (plugin '{plugin_name}')",
                line=where.pop("line", None),
                hint=hint,
                **where,
            ) from None
        source = error.source or f"{section} (plugin '{plugin_name}')"
        raise InputError(
            detail, source=source, line=error.line, field=error.field, hint=hint
        ) from None
    except (PluginError, EvaluationError):
        raise  # a composed retriever (fusion) resolving its parts has said what went wrong
    except Exception as error:
        # A retriever that cannot reach its backend while starting: the evaluation cannot be
        # carried out (exit code 3), and the message must not carry a secret from the options.
        raise EvaluationError(
            f"retriever '{instance}' (plugin '{plugin_name}') could not start: "
            f"{type(error).__name__}: {scrub(str(error), hidden)}"
        ) from None


def _option_hint(factory: Any, option: str | None) -> str:
    """The closest option the factory accepts, and the list of all it accepts."""
    import difflib
    import inspect

    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return "check the plugin's documented options"
    accepted = sorted(
        p.name
        for p in parameters
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and not p.name.startswith("_")
    )
    if not accepted:
        return "check the plugin's documented options"
    close = []
    if option:
        close = (
            difflib.get_close_matches(option, accepted, n=1, cutoff=0.6)
            or [name for name in accepted if option.startswith(name) or name.startswith(option)][:1]
        )
    guess = f"did you mean '{close[0]}'? " if close else ""
    return f"{guess}it accepts: {', '.join(accepted)}"
