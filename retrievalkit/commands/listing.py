"""``retrievalkit list``: the question sets, retrievers and stores found, broken ones flagged."""

from __future__ import annotations

import argparse
import sys

from retrievalkit.commands.options import add_common, load_config
from retrievalkit.errors import EXIT_OK

NAME = "list"
HELP = (
    "List the question sets, retrievers and stores found; broken plugins are flagged with "
    "their error."
)


def configure(parser: argparse.ArgumentParser) -> None:
    add_common(parser, store=False)


def run(args: argparse.Namespace) -> int:
    from retrievalkit import plugins
    from retrievalkit.render.summary import to_json_text

    config = load_config(args)
    catalogue = plugins.set_catalogue()
    retrievers, broken_retrievers = plugins.load_group(plugins.RETRIEVERS)
    stores, broken_stores = plugins.load_group(plugins.STORES)
    broken = [*catalogue.broken, *broken_retrievers, *broken_stores]
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
        "broken": [
            {"group": item.plugin.group, "plugin": item.plugin.label, "error": item.error}
            for item in broken
        ],
    }
    if args.format == "json":
        sys.stdout.write(to_json_text(document) + "\n")
        return EXIT_OK
    lines = []
    for section in ("sets", "retrievers", "stores"):
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
