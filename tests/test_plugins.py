"""Third-party plugins are found through real installed package metadata, broken ones named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import PluginSites, RunCli


def test_list_reads_metadata_and_check_flags_the_broken_plugin(
    cli: RunCli, plugin_sites: PluginSites
) -> None:
    result = cli("list", "--format", "json", sites=[plugin_sites.main])
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    sets = {entry["name"]: entry["provider"] for entry in listing["sets"]}
    retrievers = {entry["name"]: entry["provider"] for entry in listing["retrievers"]}
    stores = {entry["name"]: entry["provider"] for entry in listing["stores"]}
    # Exactly these from retrievalkit and the test plugin; a plugin the developer happens
    # to have installed beside them (the example plugin, say) is theirs to list.
    ours = {
        name: provider
        for name, provider in sets.items()
        if provider.startswith(("retrievalkit-eval[", "rk-testplugin["))
    }
    assert ours == {"demo": "retrievalkit-eval[demo]", "tiny": "rk-testplugin[tiny]"}
    assert retrievers["tiny-keyword"] == "rk-testplugin[tiny-keyword]"
    assert retrievers["tiny-failing"] == "rk-testplugin[tiny-failing]"
    assert retrievers["bm25-demo"] == "retrievalkit-eval[bm25-demo]"
    # Listed from metadata alone: the broken module is not imported without --check.
    assert retrievers["broken-one"] == "rk-testplugin[broken-one]"
    assert listing["broken"] == [] and listing["collisions"] == []
    assert stores["tinystore:"] == "rk-testplugin[tinystore]"
    assert stores["sqlite:"] == "retrievalkit-eval[sqlite]"
    for group in ("embedders", "rerankers", "corpora", "generators", "judges", "commands"):
        assert listing[group], group

    checked = cli("list", "--check", "--format", "json", sites=[plugin_sites.main])
    assert checked.returncode == 1, checked.stderr
    (broken,) = json.loads(checked.stdout)["broken"]
    assert broken["group"] == "retrievalkit.retrievers"
    assert broken["plugin"] == "rk-testplugin[broken-one]"
    assert "ImportError" in broken["error"]
    assert "deliberately broken" in broken["error"]


def test_list_check_as_a_table_names_the_broken_plugin(
    cli: RunCli, plugin_sites: PluginSites
) -> None:
    result = cli("list", "--check", sites=[plugin_sites.main])
    assert result.returncode == 1, result.stderr
    assert "broken plugins:" in result.stdout
    assert "rk-testplugin[broken-one]" in result.stdout
    assert "tiny-keyword" in result.stdout
    assert cli("list", "--check").returncode == 0


def test_without_the_package_nothing_of_it_is_found(cli: RunCli) -> None:
    result = cli("list", "--format", "json")
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    providers = {entry["provider"].partition("[")[0] for entry in listing["sets"]}
    assert "rk-testplugin" not in providers and "retrievalkit-eval" in providers
    assert listing["broken"] == []
    assert "tiny-keyword" not in result.stdout and "tinystore" not in result.stdout


def test_eval_end_to_end_with_the_plugins_set_retriever_and_store(
    cli: RunCli, plugin_sites: PluginSites, tmp_path: Path
) -> None:
    store = "tinystore:///runs.jsonl"
    result = cli(
        "eval", "--set", "tiny", "--retriever", "tiny-keyword", "--store", store,
        "--format", "json", sites=[plugin_sites.main],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["set"] == "tiny"
    assert summary["retriever"] == "tiny-keyword"
    assert summary["questions"] == 4
    assert summary["metrics"]["hit@1"]["mean"] == 1.0
    assert summary["metrics"]["recall@1"]["n"] == 3  # t4 is a no-answer question
    assert summary["saved_to"] == store
    assert summary["manifest"]["plugin"] == "tiny-keyword"
    lines = (tmp_path / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["run_id"] for line in lines] == [summary["run_id"]]

    history = cli(
        "history", "--set", "tiny", "--retriever", "tiny-keyword", "--store", store,
        "--format", "json", sites=[plugin_sites.main],
    )  # fmt: skip
    assert history.returncode == 0, history.stderr
    assert [row["run_id"] for row in json.loads(history.stdout)] == [summary["run_id"]]


def test_configured_plugin_options_are_passed(
    cli: RunCli, plugin_sites: PluginSites, tmp_path: Path
) -> None:
    (tmp_path / "retrievalkit.toml").write_text(
        '[retrievers.two-fruits]\nplugin = "tiny-keyword"\nfruits = ["apple", "banana"]\n',
        encoding="utf-8",
    )
    result = cli(
        "eval", "--set", "tiny", "--retriever", "two-fruits", "--store", "memory:",
        "--format", "json", sites=[plugin_sites.main],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["metrics"]["hit@1"]["mean"] == 0.75  # grapes are no longer found
    assert summary["manifest"]["retriever_options"] == {"fruits": ["apple", "banana"]}


def test_the_broken_plugin_cannot_be_used_and_says_why(
    cli: RunCli, plugin_sites: PluginSites
) -> None:
    result = cli(
        "eval", "--set", "tiny", "--retriever", "broken-one", "--no-save",
        sites=[plugin_sites.main],
    )  # fmt: skip
    assert result.returncode == 2
    assert "rk-testplugin[broken-one]" in result.stderr
    assert "deliberately broken" in result.stderr


def test_two_providers_of_one_set_name_is_an_error_naming_both(
    cli: RunCli, plugin_sites: PluginSites
) -> None:
    both = [plugin_sites.main, plugin_sites.duplicate]
    result = cli("eval", "--set", "tiny", "--retriever", "tiny-keyword", "--no-save", sites=both)
    assert result.returncode == 2, result.stderr
    assert "'tiny'" in result.stderr
    assert "rk-testplugin[tiny]" in result.stderr
    assert "rk-testplugin-dupe[tiny]" in result.stderr
    assert result.stdout == ""
    # The clash makes only that name unusable: every other set still works.
    demo = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--no-save", sites=both)
    assert demo.returncode == 0, demo.stderr
    listing = cli("list", "--check", "--format", "json", sites=both)
    assert listing.returncode == 1
    [clash] = json.loads(listing.stdout)["collisions"]
    assert clash["packages"] == ["rk-testplugin[tiny]", "rk-testplugin-dupe[tiny]"]
    assert clash["used"] is None


def test_an_unknown_retriever_lists_the_installed_ones(
    cli: RunCli, plugin_sites: PluginSites
) -> None:
    result = cli(
        "eval", "--set", "demo", "--retriever", "tiny-keywrod", "--no-save",
        sites=[plugin_sites.main],
    )  # fmt: skip
    assert result.returncode == 2
    assert "unknown retriever 'tiny-keywrod'" in result.stderr
    for name in ("bm25", "bm25-demo", "tiny-keyword", "tiny-failing"):
        assert name in result.stderr


def test_options_the_plugin_does_not_accept(
    cli: RunCli, plugin_sites: PluginSites, tmp_path: Path
) -> None:
    (tmp_path / "retrievalkit.toml").write_text(
        '[retrievers.picky]\nplugin = "tiny-keyword"\ncolour = "red"\n', encoding="utf-8"
    )
    result = cli(
        "eval", "--set", "tiny", "--retriever", "picky", "--no-save", sites=[plugin_sites.main]
    )
    assert result.returncode == 2
    assert "does not accept" in result.stderr
    assert "retrievalkit.toml, line 3, field 'retrievers.picky.colour'" in result.stderr


def test_an_unknown_store_scheme_lists_the_plugin_stores(
    cli: RunCli, plugin_sites: PluginSites
) -> None:
    result = cli(
        "eval", "--set", "tiny", "--retriever", "tiny-keyword", "--store", "tinystor:///x",
        sites=[plugin_sites.main],
    )  # fmt: skip
    assert result.returncode == 2
    assert "unknown store scheme 'tinystor'" in result.stderr
    assert "tinystore" in result.stderr
