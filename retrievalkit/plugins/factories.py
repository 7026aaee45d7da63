"""Create plugins of every kind by name, from the config and ``--option`` pairs: one path."""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from retrievalkit.errors import InputError, PluginError
from retrievalkit.formats.config import PluginInstance
from retrievalkit.plugins import registry as plugins

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


def parse_option(text: str) -> tuple[str, Any]:
    """``key=value`` from the command line; the value is read as TOML, else kept as text.

    So ``timeout=5`` gives the number 5, ``retries=0`` the number 0, and
    ``base_url=http://127.0.0.1:8000/v1`` the string.
    """
    key, found, raw = text.partition("=")
    key = key.strip()
    if not found or not key or not key.replace("_", "").replace("-", "").isalnum():
        raise InputError(
            f"expected KEY=VALUE, got {text!r}",
            field="--option",
            hint="e.g. --option model=llama3 --option timeout=30",
        )
    try:
        value = tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.replace("-", "_"), value


def parse_options(texts: Sequence[str]) -> dict[str, Any]:
    return dict(parse_option(text) for text in texts)


def create_instance(
    group: str,
    name: str,
    configured: Mapping[str, PluginInstance],
    overrides: Mapping[str, Any],
    *,
    section: str,
) -> tuple[PluginInstance, Any]:
    """The ``[section.NAME]`` instance of the config, or the plugin called ``name``, created.

    ``overrides`` (from ``--option``) replace or add options. The instance is returned
    too, so callers can record which plugin and options were used.
    """
    entry = configured.get(name)
    if entry is None:
        known = {plugin.name for plugin in plugins.find(group)}
        if name not in known:
            kind = section.rstrip("s")
            raise PluginError(
                f"unknown {kind} '{name}': no [{section}.{name}] in the config and no plugin of "
                f"that name (configured: {', '.join(sorted(configured)) or 'none'}; "
                f"plugins: {', '.join(sorted(known)) or 'none'})"
            )
        entry = PluginInstance(name, name, {})
    options = {**entry.options, **overrides}
    entry = PluginInstance(entry.name, entry.plugin, options)
    return entry, call_factory(group, entry.plugin, options, source=f"[{section}.{entry.name}]")


def call_factory(group: str, plugin_name: str, options: Mapping[str, Any], *, source: str) -> Any:
    """Load a plugin and call it with keyword options; a wrong option names the plugin."""
    return create_plugin(group, plugin_name, options, source=source)


def create_retriever(
    plugin_name: str,
    options: dict[str, Any],
    *,
    instance: str,
    config_file: str | None = None,
    resolver: Any = None,
) -> Any:
    """Call a retriever factory with the options of ``[retrievers.INSTANCE]``.

    ``resolver`` (a `retrievalkit.plugins.resolution.Resolver`) is handed to a factory that
    declares a ``resolver`` parameter: a composite builds its parts with it.
    """
    return create_plugin(
        plugins.RETRIEVERS,
        plugin_name,
        options,
        source=f"[retrievers.{instance}]",
        table=f"retrievers.{instance}",
        config_file=config_file,
        instance=instance,
        resolver=resolver,
    )


#: The keyword a composite's factory declares to be handed its `Resolver`; no option of
#: that name can be set by a user.
RESOLVER = "resolver"
#: Parameters retrievalkit hands to a factory itself: never options a user sets or sees.
HANDED = frozenset({RESOLVER})

#: What each kind of plugin is called in messages.
_KINDS = {
    plugins.RETRIEVERS: "retriever",
    plugins.CORPORA: "corpus",
    plugins.GENERATORS: "generator",
    plugins.JUDGES: "judge",
    plugins.EMBEDDERS: "embedder",
    plugins.RERANKERS: "reranker",
}


def create_plugin(
    group: str,
    plugin_name: str,
    options: Mapping[str, Any],
    *,
    source: str,
    table: str | None = None,
    config_file: str | None = None,
    instance: str | None = None,
    resolver: Any = None,
) -> Any:
    """Load a plugin of ``group`` and call its factory with keyword options: the one path.

    Every plugin kind goes through here, so each gets the same care: secret option values
    never appear in a message (even when the plugin puts them in its own exception); a
    wrong option names the plugin, the closest accepted option and all of them; with the
    config file the options come from (``config_file`` and the dotted ``table``, such as
    ``retrievers.kb``), a message names that file, the line and the option. ``source``
    says where the options come from otherwise (``[generators.x]``, ``--corpus``).
    A factory that fails in any other way cannot start: `EvaluationError` (exit code 3).
    A factory that declares a ``resolver`` parameter is handed ``resolver``, when given,
    to build its parts.
    """
    from retrievalkit.errors import EvaluationError
    from retrievalkit.redaction import remember, scrub, secret_values

    kind = _KINDS.get(group, "plugin")
    who = instance if instance is not None else plugin_name
    section = source if config_file is None else f"{config_file}, {source}"
    hidden = secret_values(dict(options))
    remember(hidden)

    def place(option: str | None) -> dict[str, Any]:
        """Where an option of this instance is set: file, line and dotted key."""
        if config_file is None or table is None:
            return {"source": section, "field": option}
        return config_place(config_file, table, option)

    try:
        plugin = plugins.find_one(group, plugin_name)
    except PluginError as error:
        if config_file is None:
            raise
        raise InputError(str(error), **place("plugin")) from None
    factory = plugins.load(plugin)
    if RESOLVER in options:
        raise InputError(
            f"'{RESOLVER}' is not an option of the {kind} plugin '{plugin_name}': "
            "retrievalkit hands it to the plugin",
            **place(RESOLVER),
        )
    arguments = dict(options)
    if resolver is not None and _declares(factory, RESOLVER):
        arguments[RESOLVER] = resolver
    try:
        return factory(**arguments)
    except TypeError as error:
        text = scrub(str(error), hidden)
        if "argument" in text:
            named = re.search(r"keyword argument '(\w+)'", text)
            option = named.group(1) if named and named.group(1) in options else None
            raise InputError(
                f"{kind} plugin '{plugin_name}' does not accept these options: {text}",
                **place(option),
                hint=_option_hint(factory, option),
            ) from None
        raise EvaluationError(
            f"{kind} '{who}' (plugin '{plugin_name}') could not start: TypeError: {text}"
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
        where_from = error.source or f"{section} (plugin '{plugin_name}')"
        raise InputError(
            detail, source=where_from, line=error.line, field=error.field, hint=hint
        ) from None
    except (PluginError, EvaluationError):
        raise  # a composed plugin (fusion) resolving its parts has said what went wrong
    except Exception as error:
        from retrievalkit.plugins.missing import missing_dependency

        missing = missing_dependency(error, plugin, kind)
        if missing is not None:
            raise missing from None
        # A plugin that cannot reach its backend while starting: the evaluation cannot be
        # carried out (exit code 3), and the message must not carry a secret from the options.
        raise EvaluationError(
            f"{kind} '{who}' (plugin '{plugin_name}') could not start: "
            f"{type(error).__name__}: {scrub(str(error), hidden)}"
        ) from None


def config_place(config_file: str, table: str, option: str | None) -> dict[str, Any]:
    """Where ``option`` of the ``[table]`` of a configuration file is set: the file, its
    line and the dotted key, as an `InputError`'s ``source``, ``line`` and ``field``."""
    from retrievalkit.formats.text_files import key_line

    key = table + (f".{option}" if option else "")
    return {"source": config_file, "line": key_line(config_file, key), "field": key}


def _declares(factory: Any, parameter: str) -> bool:
    """Whether ``factory`` takes a keyword argument of that name."""
    import inspect

    try:
        found = inspect.signature(factory).parameters.get(parameter)
    except (TypeError, ValueError):
        return False
    return found is not None and found.kind in (found.POSITIONAL_OR_KEYWORD, found.KEYWORD_ONLY)


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
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and not p.name.startswith("_")
        and p.name not in HANDED
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


def load_factory(reference: Any, *, field: str = "factory") -> Callable[..., Any]:
    """The callable ``"package.module:function"`` names, imported from the team's own code.

    Errors name ``field`` and say what was wrong: the shape, a module that does not
    import (with its error), or a missing or non-callable attribute.
    """
    if not isinstance(reference, str) or reference.count(":") != 1:
        raise InputError(
            f"must be 'module:function', got {reference!r}",
            field=field,
            hint='e.g. factory = "my_rag.pipelines:build_retriever"',
        )
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise InputError(f"must be 'module:function', got {reference!r}", field=field)
    # The team's code lives in the project folder, which a console script's sys.path
    # lacks; appended, it never shadows an installed package.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise InputError(
            f"cannot import {module_name} ({type(error).__name__}: {error})",
            field=field,
            hint="is the module on sys.path? run from the project folder or install it",
        ) from None
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise InputError(f"{module_name} has no attribute {attribute}", field=field)
    if not callable(target):
        raise InputError(f"{reference} is not callable", field=field)
    return target  # type: ignore[no-any-return]
