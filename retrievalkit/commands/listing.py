"""``retrievalkit list``: the sets, retrievers, stores, embedders and commands, broken flagged."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from retrievalkit.commands.options import add_common, load_config
from retrievalkit.errors import EXIT_OK, PluginError

if TYPE_CHECKING:
    from retrievalkit.plugins import BrokenPlugin

NAME = "list"
HELP = (
    "List the question sets, retrievers, stores, embedders and commands found; broken plugins "
    "are flagged with their error."
)


def configure(parser: argparse.ArgumentParser) -> None:
    add_common(parser, store=False)


def run(args: argparse.Namespace) -> int:
    from retrievalkit import plugins

    config = load_config(args)
    catalogue = plugins.set_catalogue()
    retrievers, broken_retrievers = plugins.load_group(plugins.RETRIEVERS)
    stores, broken_stores = plugins.load_group(plugins.STORES)
    embedders, broken_embedders = plugins.load_group(plugins.EMBEDDERS)
    commands, broken_commands = _commands()
    broken = [
        *catalogue.broken,
        *broken_retrievers,
        *broken_stores,
        *broken_embedders,
        *broken_commands,
    ]
    document = {
        "sets": [
            {"name": name, "provider": plugin.label}
            for name, (plugin, _) in sorted(catalogue.offers.items())
        ]
        + [{"name": name, "provider": f"config: {path}"} for name, path in config.sets.items()],
        "retrievers": [
            {"name": name, "provider": plugin.label}
            for name, (plugin, _) in sorted(retrievers.items())
        ]
        + [
            {"name": name, "provider": f"config: plugin {entry.plugin}"}
            for name, entry in config.retrievers.items()
        ],
        "stores": [
            {"name": f"{name}:", "provider": plugin.label}
            for name, (plugin, _) in sorted(stores.items())
        ],
        # Loading an embedder's entry point imports no model: that happens when one is made.
        "embedders": [
            {"name": name, "provider": plugin.label}
            for name, (plugin, _) in sorted(embedders.items())
        ],
        "commands": commands,
        "broken": [
            {"group": item.plugin.group, "plugin": item.plugin.label, "error": item.error}
            for item in broken
        ],
    }
    if args.format == "json":
        # Imported here: the renderer brings cattrs, which the text listing never needs.
        from retrievalkit.render.summary import to_json_text

        sys.stdout.write(to_json_text(document) + "\n")
        return EXIT_OK
    lines = []
    for section in ("sets", "retrievers", "stores", "embedders", "commands"):
        lines.append(f"{section}:")
        lines.extend(f"  {entry['name']:<24} {entry['provider']}" for entry in document[section])
    if broken:
        lines.append("broken plugins:")
        lines.extend(
            f"  {entry['plugin']} ({entry['group']}): {entry['error']}"
            for entry in document["broken"]
        )
    text = "\n".join(lines) + "\n"
    if args.format == "markdown":
        text = "```\n" + text + "```\n"
    sys.stdout.write(text)
    return EXIT_OK


def _commands() -> tuple[list[dict[str, str]], list[BrokenPlugin]]:
    """Built-in commands, then the plugin commands that load; a broken one is flagged."""
    import importlib

    from retrievalkit import plugins
    from retrievalkit.commands import BUILTIN
    from retrievalkit.plugins import BrokenPlugin

    listed = [
        {
            "name": importlib.import_module(f"retrievalkit.commands.{module}").NAME,
            "provider": "retrievalkit (built-in)",
        }
        for module in BUILTIN
    ]
    taken = {entry["name"] for entry in listed}
    broken: list[BrokenPlugin] = []
    loaded, failed = plugins.load_group(plugins.COMMANDS)
    broken.extend(failed)
    for name, (plugin, obj) in sorted(loaded.items()):
        try:
            plugins.as_command(plugin, obj)
        except PluginError as error:
            broken.append(BrokenPlugin(plugin, str(error)))
            continue
        shadowed = " (hidden by the built-in command of that name)" if name in taken else ""
        listed.append({"name": name, "provider": plugin.label + shadowed})
    return listed, broken
