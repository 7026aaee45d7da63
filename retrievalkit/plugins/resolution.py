"""Turn the names a user types (``--set``, ``--retriever``) into loaded sets and retrievers.

A set is a file or directory path, a ``[sets.NAME]`` of the config, or a name offered
by a question-set plugin, tried in that order. A retriever is a ``[retrievers.NAME]``
of the config, or a plugin that needs no options, named directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from retrievalkit.errors import InputError, PluginError
from retrievalkit.formats.config import Config
from retrievalkit.model.values import GoldenQuestionSet
from retrievalkit.plugins import registry as plugins
from retrievalkit.plugins.factories import config_place, create_retriever


def resolve_set(name: str, config: Config) -> GoldenQuestionSet:
    return resolve_set_and_provider(name, config)[0]


def resolve_set_and_provider(
    name: str, config: Config
) -> tuple[GoldenQuestionSet, plugins.Plugin | None]:
    """The set, and the plugin that served it (None for a file or a [sets.NAME])."""
    from retrievalkit.formats.golden_sets import check_provided_set, load_set_file
    from retrievalkit.formats.limits import check_path

    check_path(name, field="--set")
    path = Path(name)
    if path.exists():
        return load_set_file(path), None
    if name in config.sets:
        return load_set_file(config.sets[name], name=name), None
    catalogue = plugins.set_catalogue()
    if name in catalogue.offers:
        plugin, provider = catalogue.offers[name]
        try:
            loaded = provider.load(name)
        except InputError:
            raise
        except Exception as error:
            raise PluginError(
                f"question set provider {plugin.label} failed to load set '{name}': "
                f"{type(error).__name__}: {error}"
            ) from error
        if not isinstance(loaded, GoldenQuestionSet):
            raise PluginError(f"question set provider {plugin.label} did not return a set")
        return check_provided_set(loaded, plugin.label), plugin
    clash = catalogue.ambiguous(name)
    if clash is not None:
        raise PluginError(f"question set {clash.describe()}, or load the set from a file")
    known = sorted({*config.sets, *catalogue.offers})
    broken = "".join(
        f"; broken provider {item.plugin.label}: {item.error}" for item in catalogue.broken
    )
    looks_like_path = any(part in name for part in ("/", "\\", ".jsonl", ".toml", ".json"))
    raise InputError(
        (f"no such file '{name}'" if looks_like_path else f"unknown set '{name}'")
        + f" (known sets: {', '.join(known) or 'none'}){broken}",
        field="--set",
        hint="give a golden set file, a [sets.NAME] from the config, or a plugin's set name",
    )


@attrs.frozen
class ResolvedRetriever:
    name: str
    plugin: str
    options: dict[str, Any]
    retriever: Any


Builder = Callable[[str, Config, Callable[[str, Config], ResolvedRetriever]], ResolvedRetriever]
"""What builds retrievers while a sweep shares them: ``builder(name, config, build)``, which
may hand out one it built before instead of calling ``build``."""


@attrs.frozen
class Resolver:
    """What a composite plugin's factory is handed to build its parts.

    A retriever factory that declares a keyword parameter ``resolver`` receives one: it
    resolves the names of other retrievers in the configuration being resolved (its
    ``[retrievers.NAME]`` tables, or option-less plugins), and creates embedders and
    rerankers by plugin name, each through the one factory path. ``share`` is the
    builder a sweep uses to hand out one instance per distinct configuration.
    """

    config: Config = attrs.field(factory=Config)
    share: Builder | None = None

    def retriever(self, name: str) -> ResolvedRetriever:
        """The retriever ``name`` names, with its plugin and options."""
        return resolve_retriever(name, self.config, share=self.share)

    def embedder(
        self, name: str, options: Mapping[str, Any] | None = None, *, field: str = "embedder"
    ) -> Any:
        """The ``retrievalkit.embedders`` plugin ``name`` created with ``options``."""
        from retrievalkit.embedders import create_embedder

        return create_embedder(name, options, field=field)

    def reranker(
        self, name: str, options: Mapping[str, Any] | None = None, *, field: str = "reranker"
    ) -> Any:
        """The ``retrievalkit.rerankers`` plugin ``name`` created with ``options``."""
        from retrievalkit.rerankers import create_reranker

        return create_reranker(name, options, field=field)


def resolve_retriever(
    name: str, config: Config, *, share: Builder | None = None
) -> ResolvedRetriever:
    """The retriever ``name`` names in ``config``; with ``share``, as that builder hands it out."""
    if share is not None:
        return share(name, config, lambda each, within: _resolve_retriever(each, within, share))
    return _resolve_retriever(name, config, None)


def plan_retriever(name: str, config: Config) -> tuple[str, dict[str, Any]]:
    """The plugin and options ``name`` stands for, without building it: what a run's
    manifest records, and what a worker of another process builds it from."""
    configured = config.retrievers.get(name)
    if configured is not None:
        try:
            plugins.find_one(plugins.RETRIEVERS, configured.plugin)
        except PluginError as error:
            if config.source is None:
                raise
            where = config_place(str(config.source), f"retrievers.{name}", "plugin")
            raise InputError(str(error), **where) from None
        return configured.plugin, dict(configured.options)
    known = {plugin.name for plugin in plugins.find(plugins.RETRIEVERS)}
    if name not in known:
        raise PluginError(
            f"unknown retriever '{name}' (--retriever): no [retrievers.{name}] in "
            f"{config.source or 'any config file'} and no plugin of that name "
            f"(configured: {', '.join(sorted(config.retrievers)) or 'none'}; "
            f"plugins: {', '.join(sorted(known)) or 'none'})"
        )
    return name, {}


def _resolve_retriever(name: str, config: Config, share: Builder | None) -> ResolvedRetriever:
    configured = config.retrievers.get(name)
    plugin_name, options = plan_retriever(name, config)
    retriever = create_retriever(
        plugin_name,
        options,
        instance=name,
        config_file=config.source if configured is not None else None,
        resolver=Resolver(config, share),
    )
    if not callable(getattr(retriever, "retrieve", None)):
        raise PluginError(
            f"retriever plugin '{plugin_name}' returned {type(retriever).__name__}, "
            "which has no retrieve(question, limit) method"
        )
    return ResolvedRetriever(name, plugin_name, options, retriever)
