"""``retrievalkit list``: every group's plugins, from package metadata; ``--check`` loads them."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import add_common, load_config
from retrievalkit.errors import EXIT_OK, EXIT_REGRESSION, PluginError

if TYPE_CHECKING:
    from retrievalkit.plugins.registry import BrokenPlugin, Collision, Plugin

BUILTIN_LABEL = "retrievalkit (built-in)"
NAME, HELP = SUMMARIES["listing"]

#: The files `retrievalkit.formats.config.find_config` reads from the current folder.
CONFIG_FILES = ("retrievalkit.toml", "pyproject.toml")
#: The sections of the listing after the sets, each an entry-point group.
_SECTIONS = {
    "retrievers": "retrievalkit.retrievers",
    "stores": "retrievalkit.stores",
    "embedders": "retrievalkit.embedders",
    "rerankers": "retrievalkit.rerankers",
    "corpora": "retrievalkit.corpora",
    "generators": "retrievalkit.generators",
    "judges": "retrievalkit.judges",
}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "plugin",
        nargs="?",
        metavar="PLUGIN",
        help="show this plugin's description and options (type and default of each), e.g. "
        "retrievalkit list rerank; without it, list every plugin",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="import every installed plugin too, list the ones that fail with their error, "
        "and exit with code 1 when one is broken or two packages claim one name",
    )
    add_common(parser, store=False)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.plugins import registry as plugins

    if args.plugin:
        return _show_plugin(args)
    config_sets, config_retrievers = _configured(args)
    # Every section is read from package metadata alone, without importing the plugins;
    # set names too when the provider's package declares them (plugins.SET_NAMES), else
    # the provider is loaded and asked. --check loads and asks every provider.
    catalogue = plugins.set_catalogue() if args.check else plugins.listed_sets()
    broken: list[BrokenPlugin] = [*catalogue.broken, *catalogue.misdeclared]
    collisions: list[Collision] = list(catalogue.collisions)
    document: dict[str, Any] = {
        "sets": [
            {"name": name, "provider": plugin.label}
            for name, (plugin, _) in sorted(catalogue.offers.items())
        ]
        + [
            {"name": collision.name, "provider": _ambiguous(collision.plugins)}
            for collision in catalogue.collisions
            if collision.chosen is None
        ]
        + [{"name": name, "provider": f"config: {path}"} for name, path in config_sets.items()],
    }
    for section, group in _SECTIONS.items():
        chosen, clashes = plugins.registered(group)
        collisions.extend(clashes)
        suffix = ":" if group == plugins.STORES else ""
        entries = [
            {"name": name + suffix, "provider": plugin.label} for name, plugin in chosen.items()
        ]
        entries += [
            {"name": clash.name + suffix, "provider": _ambiguous(clash.plugins)}
            for clash in clashes
            if clash.chosen is None
        ]
        if section == "retrievers":
            entries += [
                {"name": name, "provider": f"config: plugin {entry.plugin}"}
                for name, entry in config_retrievers.items()
            ]
        document[section] = sorted(entries, key=lambda entry: entry["name"])
    commands, command_collisions, hidden_commands = _commands()
    document["commands"] = commands
    collisions.extend(command_collisions)
    if args.check:
        broken = _check_everything(broken)
    document["collisions"] = [
        {
            "group": collision.group,
            "name": collision.name,
            "packages": [plugin.label for plugin in collision.plugins],
            "used": None if collision.chosen is None else collision.chosen.label,
            "message": collision.describe(),
        }
        for collision in collisions
    ] + hidden_commands
    document["broken"] = [
        {"group": item.plugin.group, "plugin": item.plugin.label, "error": item.error}
        for item in broken
    ]
    failed = args.check and bool(broken or document["collisions"])
    if args.format == "json":
        import json

        # The form of every --format json (render.summary.to_json_text), without the
        # renderer's imports (attrs, cattrs, the model), which a listing never needs.
        text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
        sys.stdout.write(text + "\n")
        return EXIT_REGRESSION if failed else EXIT_OK
    lines = []
    for section in ("sets", *_SECTIONS, "commands"):
        if not document[section] and section not in ("sets", "retrievers", "stores"):
            continue
        lines.append(f"{section}:")
        lines.extend(f"  {entry['name']:<24} {entry['provider']}" for entry in document[section])
    if document["collisions"]:
        lines.append("name collisions:")
        lines.extend(f"  {entry['group']}: {entry['message']}" for entry in document["collisions"])
    if broken:
        lines.append("broken plugins:")
        lines.extend(
            f"  {entry['plugin']} ({entry['group']}): {entry['error']}"
            for entry in document["broken"]
        )
    if not args.check:
        lines.append("(plugins are listed from package metadata; --check imports each one)")
    elif not failed:
        lines.append("every plugin loads, and no name is claimed twice")
    text = "\n".join(lines) + "\n"
    if args.format == "markdown":
        text = "```\n" + text + "```\n"
    sys.stdout.write(text)
    return EXIT_REGRESSION if failed else EXIT_OK


def _show_plugin(args: argparse.Namespace) -> int:
    """One plugin's description and options, from every group that has a plugin so named."""
    from retrievalkit.errors import InputError
    from retrievalkit.plugins import registry as plugins
    from retrievalkit.render.plugin_options import describe_factory, option_rows

    found = []
    for group in _SECTIONS.values():
        chosen, _ = plugins.registered(group)
        if args.plugin in chosen:
            found.append((group, chosen[args.plugin]))
    if not found:
        raise InputError(
            f"no plugin is called '{args.plugin}'",
            field="PLUGIN",
            hint="retrievalkit list shows the installed ones",
        )
    document = []
    lines: list[str] = []
    for group, plugin in found:
        factory = plugins.load(plugin)
        document.append(
            {
                "name": args.plugin,
                "group": group,
                "provider": plugin.label,
                "options": [
                    {"name": name, "type": kind, "default": default}
                    for name, kind, default in option_rows(factory)
                ],
            }
        )
        lines += [*describe_factory(args.plugin, group, factory), ""]
    if args.format == "json":
        import json

        text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False)
        sys.stdout.write(text + "\n")
    else:
        sys.stdout.write("\n".join(lines))
    return EXIT_OK


def _configured(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sets and retriever instances of the configuration, if there is one.

    Without --config and without either file `find_config` looks for, there is nothing
    to read, and the configuration module (with attrs and a TOML parser) is not imported.
    """
    import os

    if args.config is None and not any(os.path.isfile(name) for name in CONFIG_FILES):
        return {}, {}
    config = load_config(args)
    return dict(config.sets), dict(config.retrievers)


def _ambiguous(claimants: tuple[Plugin, ...]) -> str:
    return "ambiguous: " + " and ".join(plugin.label for plugin in claimants)


def _check_everything(broken: list[BrokenPlugin]) -> list[BrokenPlugin]:
    """Import every plugin of every group, one stevedore manager a group (the set providers
    are already loaded)."""
    from retrievalkit.plugins import registry as plugins

    found = list(broken)
    for group in plugins.GROUPS:
        if group == plugins.QUESTION_SETS:
            continue
        for plugin, obj, failure in plugins.load_all(plugins.find(group)):
            try:
                if failure is not None:
                    raise failure
                if group == plugins.COMMANDS:
                    plugins.as_command(plugin, obj)
            except PluginError as error:
                found.append(plugins.BrokenPlugin(plugin, str(error)))
    return found


def _commands() -> tuple[list[dict[str, str]], list[Collision], list[dict[str, Any]]]:
    """Built-in commands, then the plugin commands (from metadata), the collisions among
    plugin commands, and the plugin commands a built-in command of that name hides."""
    from retrievalkit.plugins import registry as plugins

    listed = [{"name": name, "provider": BUILTIN_LABEL} for name, _ in SUMMARIES.values()]
    taken = {entry["name"] for entry in listed}
    chosen, collisions = plugins.registered(plugins.COMMANDS)
    hidden: list[dict[str, Any]] = []
    for clash in collisions:
        if clash.chosen is None:
            listed.append({"name": clash.name, "provider": _ambiguous(clash.plugins)})
    for name, plugin in sorted(chosen.items()):
        if name not in taken:
            listed.append({"name": name, "provider": plugin.label})
            continue
        listed.append(
            {
                "name": name,
                "provider": f"{plugin.label} (hidden by the built-in command of that name)",
            }
        )
        hidden.append(
            {
                "group": plugins.COMMANDS,
                "name": name,
                "packages": [BUILTIN_LABEL, plugin.label],
                "used": BUILTIN_LABEL,
                "message": f"'{name}' is a built-in command and is registered by "
                f"{plugin.label}; the built-in is used",
            }
        )
    return listed, collisions, hidden
