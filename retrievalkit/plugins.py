"""Plugin discovery in three plain steps: find (metadata only), load (stevedore), use.

*find* reads entry points from package metadata without importing anything, so
``retrievalkit list`` and ``--help`` stay fast. *load* imports one plugin (or all of a
group) through stevedore and turns an import failure into a :class:`PluginError`
that names the package and entry point. A broken plugin never stops the others.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from retrievalkit.errors import InputError, PluginError

if TYPE_CHECKING:
    from retrievalkit.model import GoldenQuestionSet

QUESTION_SETS = "retrievalkit.question_sets"
RETRIEVERS = "retrievalkit.retrievers"
STORES = "retrievalkit.stores"
CORPORA = "retrievalkit.corpora"
GENERATORS = "retrievalkit.generators"
JUDGES = "retrievalkit.judges"
COMMANDS = "retrievalkit.commands"
EMBEDDERS = "retrievalkit.embedders"
GROUPS = (QUESTION_SETS, RETRIEVERS, STORES, COMMANDS)
_PREFIX = "retrievalkit."

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
    found: dict[str, set[Plugin]] = {}
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
            found.setdefault(point.group, set()).add(
                Plugin(point.group, point.name, point.value, package, dist.version)
            )
    return {group: tuple(sorted(plugins)) for group, plugins in found.items()}


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
            log.info("loaded plugin %s = %s (%s)", plugin.label, plugin.value, plugin.version)
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
    """Which provider offers which set name, and which providers are broken."""

    offers: dict[str, tuple[Plugin, QuestionSetProvider]]
    broken: list[BrokenPlugin]


def set_catalogue() -> SetCatalogue:
    """Load every question-set provider and index its set names; two owners is an error."""
    offers: dict[str, tuple[Plugin, QuestionSetProvider]] = {}
    broken: list[BrokenPlugin] = []
    # Not load_group: it keeps one plugin per entry-point name, which would hide a second
    # package whose provider has the same entry-point name and offers the same set.
    for plugin in find(QUESTION_SETS):
        try:
            provider = as_provider(plugin, load(plugin))
            names = list(provider.set_names())
        except Exception as error:
            broken.append(BrokenPlugin(plugin, str(error)))
            continue
        for set_name in names:
            if set_name in offers:
                other = offers[set_name][0]
                if other.package == plugin.package:
                    continue  # one package found twice on the path, not two providers
                raise PluginError(
                    f"question set '{set_name}' is offered by two providers: {other.label} "
                    f"and {plugin.label}; uninstall one, or load the set from a file"
                )
            offers[set_name] = (plugin, provider)
    return SetCatalogue(offers, broken)


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
                hint="check the plugin's documented options",
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
