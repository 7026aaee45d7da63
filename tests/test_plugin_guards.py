"""Guards that protect plugin users: validated plugin sets, chunk-id and overfetch warnings,
suggestions for misspelled options and flags, and a manifest and history that name each
plugin's package, version and changed options. Plugins are real installed packages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conftest import _install, _write_package

from retrievalkit.stores.memory import MemoryStore
from retrievalkit.testing import ContractViolation, check_question_set_provider, check_store

if TYPE_CHECKING:
    from conftest import RunCli

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "rk-guarded"
version = "{version}"

[project.entry-points."retrievalkit.question_sets"]
guarded-sets = "rk_guarded:Sets"

[project.entry-points."retrievalkit.retrievers"]
chunky = "rk_guarded:make_chunky"
same-doc = "rk_guarded:make_same_doc"

[tool.setuptools]
py-modules = ["rk_guarded"]
"""

MODULE = '''\
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet


class Sets:
    def set_names(self):
        return ["docs", "sloppy"]

    def load(self, name):
        if name == "sloppy":  # built in code, so no file loader ever checked it
            questions = [
                GoldenQuestion(id="s1", question="fine", expected=["d1"]),
                GoldenQuestion(id="s2", question="bad", expected=["d2"], grades={"d2": 0}),
                GoldenQuestion(id="s3", question="  ", expected=["d3"]),
            ]
        else:
            questions = [
                GoldenQuestion(id=f"q{n}", question=f"topic {n}", expected=[f"d{n}"])
                for n in range(1, 5)
            ]
        return GoldenQuestionSet(name=name, questions=questions, source="rk_guarded")


class Chunky:
    """Returns chunk ids (d1#0, d1#1, ...) and leaves mapping them to the kit user."""

    identifier = "chunky-v1"

    def __init__(self, depth=1):
        self.depth = depth

    def retrieve(self, question, limit):
        n = question.split()[-1]
        return [f"d{n}#{chunk}" for chunk in range(self.depth)][:limit]


def make_chunky(*, depth=1):
    return Chunky(depth)


class SameDoc:
    """Maps its chunks to documents itself, and returns one document many times."""

    identifier = "same-doc"

    def retrieve(self, question, limit):
        n = question.split()[-1]
        return [f"d{n}"] * limit


def make_same_doc():
    return SameDoc()
'''


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """rk-guarded 0.1.0 and 0.2.0, each pip-installed into a folder of its own."""
    root = tmp_path_factory.mktemp("guarded")
    sources = {
        version: _write_package(
            root / f"src-{version}", PYPROJECT.format(version=version), {"rk_guarded": MODULE}
        )
        for version in ("0.1.0", "0.2.0")
    }
    sites = {version: root / f"site-{version}" for version in sources}
    _install({sources[version]: sites[version] for version in sources})
    return sites


def test_a_plugin_set_is_checked_like_a_set_file(cli: RunCli, guarded: dict[str, Path]) -> None:
    site = [guarded["0.1.0"]]
    for command in (("validate",), ("eval", "--retriever", "bm25-demo", "--no-save")):
        result = cli(*command, "--set", "sloppy", sites=site)
        assert result.returncode == 2, result.stdout + result.stderr
        assert (
            "question set 'sloppy' from rk-guarded[guarded-sets], question 2, field 'grades': "
            "'d2' is expected but graded 0" in result.stderr
        )
    ok = cli("validate", "--set", "docs", sites=site)
    assert ok.returncode == 0, ok.stderr


def test_chunk_ids_of_expected_documents_are_flagged(cli: RunCli, guarded: dict[str, Path]) -> None:
    result = cli(
        "eval", "--set", "docs", "--retriever", "chunky", "--no-save", "--format", "json",
        sites=[guarded["0.1.0"]],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["metrics"]["hit@1"]["mean"] == 0.0
    (warning,) = [w for w in summary["warnings"] if "chunk ids" in w]
    assert "4 question(s)" in warning and "'d1#0' for expected 'd1'" in warning
    assert "doc_id_separator" in warning and "(here '#')" in warning


def test_questions_left_short_of_distinct_documents_are_flagged(
    cli: RunCli, guarded: dict[str, Path]
) -> None:
    result = cli(
        "eval", "--set", "docs", "--retriever", "same-doc", "--no-save", "--k", "1,3",
        "--overfetch", "2", "--format", "json", sites=[guarded["0.1.0"]],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    (warning,) = [w for w in summary["warnings"] if "distinct documents" in w]
    assert warning.startswith("4 question(s) got 6 ids (max(k) 3 × overfetch 2)")
    assert "raise --overfetch" in warning
    assert not [w for w in summary["warnings"] if "chunk ids" in w]


def test_the_manifest_names_packages_and_history_names_what_changed(
    cli: RunCli, guarded: dict[str, Path], tmp_path: Path
) -> None:
    config = tmp_path / "retrievalkit.toml"
    store = ["--store", "jsonl:///runs.jsonl"]

    def evaluate(version: str, depth: int) -> dict[str, Any]:
        config.write_text(f'[retrievers.c]\nplugin = "chunky"\ndepth = {depth}\n')
        result = cli(
            "eval", "--set", "docs", "--retriever", "c", "--format", "json", *store,
            sites=[guarded[version]],
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        manifest: dict[str, Any] = json.loads(result.stdout)["manifest"]
        return manifest

    first = evaluate("0.1.0", 1)
    assert first["plugin_packages"] == {"rk-guarded": "0.1.0"}  # the set's and the retriever's
    assert first["retriever_identifier"] == "chunky-v1"
    evaluate("0.2.0", 1)
    evaluate("0.2.0", 2)
    history = cli(
        "history", "--set", "docs", "--retriever", "c", "--format", "json", *store,
        sites=[guarded["0.2.0"]],
    )  # fmt: skip
    assert history.returncode == 0, history.stderr
    newest, middle, oldest = json.loads(history.stdout)
    assert newest["changes"]["retriever_options_hash"]["what"] == ["depth: 1 -> 2"]
    assert "plugin_packages" not in newest["changes"]
    assert middle["changes"]["plugin_packages"]["what"] == ["rk-guarded: 0.1.0 -> 0.2.0"]
    assert "retriever_options_hash" not in middle["changes"]
    assert oldest["changes"] == {}
    table = cli("history", "--set", "docs", "--retriever", "c", *store, sites=[guarded["0.2.0"]])
    assert "options depth: 1 -> 2" in table.stdout
    assert "plugins rk-guarded: 0.1.0 -> 0.2.0" in table.stdout


def test_an_unknown_option_gets_the_closest_accepted_one(cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "a passage"}\n')
    (tmp_path / "retrievalkit.toml").write_text(
        '[retrievers.b]\nplugin = "bm25"\ncorpus = "corpus.jsonl"\nstemer = "english"\n'
    )
    result = cli("eval", "--set", "demo", "--retriever", "b", "--no-save")
    assert result.returncode == 2, result.stderr
    assert "line 4, field 'retrievers.b.stemer'" in result.stderr
    assert "did you mean 'stemmer'?" in result.stderr
    assert "it accepts: b, corpus, doc_id_separator, fields, k1" in result.stderr


def test_a_misspelled_flag_or_command_gets_a_suggestion(cli: RunCli) -> None:
    flag = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--fial-on-regression")
    assert flag.returncode == 2
    assert "--fial-on-regression: did you mean --fail-on-regression?" in flag.stderr
    assert "see 'retrievalkit eval --help'" in flag.stderr
    command = cli("histroy", "--set", "demo")
    assert command.returncode == 2
    assert "did you mean history?" in command.stderr


def test_the_kit_reports_every_broken_rule_of_a_provider() -> None:
    from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet

    class Sloppy:
        def set_names(self) -> list[str]:
            return ["a"]

        def load(self, name: str) -> GoldenQuestionSet:
            if name != "a":
                raise KeyError(name)
            questions = [
                GoldenQuestion(id="x", question="", expected=["d"]),
                GoldenQuestion(id="x", question="twice", expected=["d"]),
            ]
            return GoldenQuestionSet(name="b", questions=questions)

    with pytest.raises(ContractViolation) as caught:
        check_question_set_provider(Sloppy())
    rules = [violation.rule for violation in caught.value.violations]
    assert rules == ["provider.set-name", "provider.validates", "provider.validates"]
    text = str(caught.value)
    assert text.startswith("3 contract violations:")
    assert "question 1 ('x')" in text and "field 'question'" in text
    assert "question 2 ('x'): the id is used twice" in text


class ForgetfulPins(MemoryStore):
    """Pins that unpin() forgets to report, and deletion that ignores pins."""

    def unpin(self, set_name: str, model: str, grader: str = "retrieval_hit_rate") -> str | None:
        super().unpin(set_name, model, grader)
        return None

    def delete(self, run_ids: Any) -> int:
        wanted = set(run_ids)
        kept = [record for record in self._records if record.run_id not in wanted]
        deleted = len(self._records) - len(kept)
        self._records = kept
        return deleted


def test_the_store_kit_checks_pins_and_deletion() -> None:
    with pytest.raises(ContractViolation) as caught:
        check_store("memory:forgetful-pins", factory=ForgetfulPins.from_url)
    rules = [violation.rule for violation in caught.value.violations]
    assert rules == ["store.pin", "store.delete"]
    assert "unpin" in caught.value.violations[0].detail
    assert "delete() of the pinned run" in caught.value.violations[1].detail
    assert check_store("memory:guards") is not None  # the built-in keeps both rules


@pytest.mark.parametrize(
    ("returned", "expected", "chunk"),
    [
        ("doc-7#3", "doc-7", True),
        ("doc-7::p2", "doc-7", True),
        ("doc-7-chunk3", "doc-7", True),
        ("doc_7_p12", "doc_7", True),
        ("doc-late-fees-2019", "doc-late-fees", False),  # a near-duplicate document
        ("doc-7b", "doc-7", False),
        ("doc-7", "doc-7", False),
        ("doc-70", "doc-7", False),
    ],
)
def test_what_counts_as_a_chunk_id(returned: str, expected: str, chunk: bool) -> None:
    from retrievalkit.pipeline.engine.diagnostics import chunk_like

    assert chunk_like(returned, expected) is chunk


def test_the_embedder_kit_reports_every_broken_rule() -> None:
    import numpy as np

    from retrievalkit.testing import check_embedder

    class SameLongVector:
        """Every text gets one vector of length 2 although it claims dot_product."""

        model_id = "same-long-vector"
        dimensions = 4
        similarity = "dot_product"

        def embed(self, texts: Any) -> Any:
            return np.ones((len(texts), 4), dtype=np.float32)

    with pytest.raises(ContractViolation) as caught:
        check_embedder(SameLongVector)
    assert [v.rule for v in caught.value.violations] == ["embedder.unit", "embedder.distinct"]
