"""Name collisions between plugins: built-ins win, a clash between third parties names both.

Two installed packages (laid out as pip lays them out: code and a dist-info folder)
claim names the core already uses (retriever ``bm25``, store scheme ``sqlite``, set
``demo``) and names only they use (``twin:`` and ``lookalike``). The built-ins must
keep working, ``list`` must show each collision with both packages, ``list --check``
must fail, and using a name two third parties claim must be an error naming both.
"""

from __future__ import annotations

import importlib.metadata
import json
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from retrievalkit.errors import PluginError
from retrievalkit.plugins import registry as plugins

if TYPE_CHECKING:
    from conftest import RunCli

SHADOW = '''\
"""Registers names the core already uses."""

from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet


class Nothing:
    identifier = "shadow-bm25"

    def retrieve(self, question, limit):
        return []


def make_bm25(**options):
    return Nothing()


def open_store(url):
    raise RuntimeError("the shadow store was used instead of the built-in one")


class Sets:
    def set_names(self):
        return ["demo", "shadow-set"]

    def load(self, name):
        question = GoldenQuestion(id="s1", question="shadow question", expected=["x"])
        return GoldenQuestionSet(name=name, questions=[question])
'''

SHADOW_TWO = '''\
"""Registers a store scheme and a retriever name that rk-shadow registers too."""


def open_twin(url):
    raise RuntimeError("an ambiguous store must never be opened")


def make():
    raise RuntimeError("an ambiguous retriever must never be made")
'''


def _lay_out(
    site: Path, name: str, module: str, code: str, points: dict[str, dict[str, str]]
) -> None:
    (site / f"{module}.py").write_text(textwrap.dedent(code), encoding="utf-8")
    dist_info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(
        "\n".join(
            f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in entries.items())
            for group, entries in points.items()
        ),
        encoding="utf-8",
    )


@pytest.fixture(scope="module")
def shadow_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("shadow-site")
    _lay_out(
        site,
        "rk-shadow",
        "rk_shadow",
        SHADOW,
        {
            "retrievalkit.retrievers": {
                "bm25": "rk_shadow:make_bm25",
                "lookalike": "rk_shadow:make_bm25",
            },
            "retrievalkit.stores": {
                "sqlite": "rk_shadow:open_store",
                "twin": "rk_shadow:open_store",
            },
            "retrievalkit.question_sets": {"shadow": "rk_shadow:Sets"},
        },
    )
    _lay_out(
        site,
        "rk-shadow-two",
        "rk_shadow_two",
        SHADOW_TWO,
        {
            "retrievalkit.retrievers": {"lookalike": "rk_shadow_two:make"},
            "retrievalkit.stores": {"twin": "rk_shadow_two:open_twin"},
        },
    )
    return site


def test_built_ins_win_every_collision(cli: RunCli, shadow_site: Path) -> None:
    done = cli(
        "eval", "--set", "demo", "--retriever", "bm25-demo", "--store", "sqlite:///runs.sqlite3",
        "--format", "json", sites=[shadow_site],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["saved_to"] == "sqlite:///runs.sqlite3"  # the built-in store
    assert summary["questions"] > 1  # the built-in demo set, not the shadow's one question
    assert summary["metrics"]["hit@3"]["mean"] > 0.5

    shadowed = cli(
        "eval", "--set", "demo", "--retriever", "bm25", "--store", "memory:", "--format", "json",
        sites=[shadow_site],
    )  # fmt: skip
    # The built-in bm25 asks for its corpus; the shadow's would have run with no options.
    assert shadowed.returncode == 2
    assert "the bm25 retriever needs the option 'corpus'" in shadowed.stderr

    own = cli(
        "eval", "--set", "shadow-set", "--retriever", "bm25-demo", "--store", "memory:",
        "--format", "json", sites=[shadow_site],
    )  # fmt: skip
    assert own.returncode == 0, own.stderr
    assert json.loads(own.stdout)["questions"] == 1


def test_list_shows_collisions_with_both_packages(cli: RunCli, shadow_site: Path) -> None:
    listed = cli("list", "--format", "json", sites=[shadow_site])
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    clashes = {(c["group"], c["name"]): (c["packages"], c["used"]) for c in document["collisions"]}
    assert clashes == {
        ("retrievalkit.question_sets", "demo"): (
            ["retrievalkit-eval[demo]", "rk-shadow[shadow]"],
            "retrievalkit-eval[demo]",
        ),
        ("retrievalkit.retrievers", "bm25"): (
            ["retrievalkit-eval[bm25]", "rk-shadow[bm25]"],
            "retrievalkit-eval[bm25]",
        ),
        ("retrievalkit.retrievers", "lookalike"): (
            ["rk-shadow[lookalike]", "rk-shadow-two[lookalike]"],
            None,
        ),
        ("retrievalkit.stores", "sqlite"): (
            ["retrievalkit-eval[sqlite]", "rk-shadow[sqlite]"],
            "retrievalkit-eval[sqlite]",
        ),
        ("retrievalkit.stores", "twin"): (["rk-shadow[twin]", "rk-shadow-two[twin]"], None),
    }
    retrievers = {entry["name"]: entry["provider"] for entry in document["retrievers"]}
    assert retrievers["bm25"] == "retrievalkit-eval[bm25]"
    assert retrievers["lookalike"] == "ambiguous: rk-shadow[lookalike] and rk-shadow-two[lookalike]"

    table = cli("list", sites=[shadow_site])
    assert "name collisions:" in table.stdout
    assert "'twin' is registered by rk-shadow[twin] and rk-shadow-two[twin]" in table.stdout

    checked = cli("list", "--check", "--format", "json", sites=[shadow_site])
    assert checked.returncode == 1
    assert json.loads(checked.stdout)["broken"] == []


def test_a_name_two_third_parties_claim_names_both(cli: RunCli, shadow_site: Path) -> None:
    store = cli(
        "eval", "--set", "demo", "--retriever", "bm25-demo", "--store", "twin:///x",
        sites=[shadow_site],
    )  # fmt: skip
    assert store.returncode == 2
    assert "rk-shadow[twin]" in store.stderr and "rk-shadow-two[twin]" in store.stderr
    assert "unknown store scheme" not in store.stderr
    retriever = cli(
        "eval", "--set", "demo", "--retriever", "lookalike", "--store", "memory:",
        sites=[shadow_site],
    )  # fmt: skip
    assert retriever.returncode == 2
    assert "rk-shadow[lookalike]" in retriever.stderr
    assert "rk-shadow-two[lookalike]" in retriever.stderr
    assert "Traceback" not in store.stderr + retriever.stderr


def test_loading_keeps_the_entry_point_and_chains_the_original_error() -> None:
    from retrievalkit.retrievers.bm25 import create_bm25

    bm25 = plugins.find_one(plugins.RETRIEVERS, "bm25")
    assert bm25.entry_point.value == bm25.value and bm25.builtin
    assert plugins.load(bm25) is create_bm25

    point = importlib.metadata.EntryPoint(
        name="gone", value="rk_module_that_is_not_installed:make", group=plugins.RETRIEVERS
    )
    missing = plugins.Plugin(plugins.RETRIEVERS, "gone", point.value, "rk-gone", "2.0", point)
    assert not missing.builtin
    with pytest.raises(PluginError) as raised:
        plugins.load(missing)
    assert "rk-gone[gone]" in str(raised.value)
    assert isinstance(raised.value.__cause__, ModuleNotFoundError)


def test_the_table_of_groups_is_complete() -> None:
    core = importlib.metadata.distribution("retrievalkit-eval")
    registered = {
        point.group for point in core.entry_points if point.group.startswith("retrievalkit.")
    }
    # retrievalkit.set_names is no plugin group: the demo provider declares its set there.
    assert registered <= {*plugins.GROUPS, plugins.SET_NAMES}
    assert set(plugins.GROUPS) == {
        f"retrievalkit.{kind}"
        for kind in (
            "question_sets", "retrievers", "stores", "embedders", "rerankers", "corpora",
            "generators", "judges", "commands",
        )
    }  # fmt: skip
