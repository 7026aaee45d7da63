"""Create corpus, generator and judge plugins by name, from the config and ``--option`` pairs."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
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
    factory = plugins.load(plugins.find_one(group, plugin_name))
    try:
        return factory(**options)
    except TypeError as error:
        if "argument" in str(error):
            raise InputError(
                f"plugin '{plugin_name}' does not accept these options: {error}",
                source=source,
                hint="check the plugin's documented options",
            ) from None
        raise
    except InputError as error:
        raise InputError(
            error.detail,
            source=error.source or f"{source} (plugin '{plugin_name}')",
            line=error.line,
            field=error.field,
            hint=error.hint,
        ) from None
