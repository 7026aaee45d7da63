"""Sweeps: the split, the grid, shared first stages, halving, resuming, confirmation, the CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.formats.config import Config, parse_config
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, QuestionForm, Retrieval
from retrievalkit.pipeline.sweeps import sweep_split
from retrievalkit.pipeline.sweeps.sweep import (
    Configuration,
    Settings,
    _pareto,
    _rounds,
    ask_locally,
    run_sweep,
)
from retrievalkit.stats.paired import holm, paired_test

if TYPE_CHECKING:
    from conftest import RunCli

DEMO = Path(rk.__file__).parent / "demo"
FAST = {"resamples": 200}


@attrs.frozen
class ClusteredQuestion(GoldenQuestion):
    """A question with the ``cluster`` field golden sets carry from 0.3 on."""

    cluster: str | None = None


def _config(tmp_path: Path, sweep: str) -> Config:
    corpus = DEMO / "corpus.jsonl"
    text = f"""
[retrievers.stemmed]
plugin = "bm25"
corpus = "{corpus}"

[retrievers.plain]
plugin = "bm25"
corpus = "{corpus}"
stemmer = ""

[retrievers.both]
plugin = "fusion"
retrievers = ["stemmed", "plain"]
{sweep}
"""
    path = tmp_path / "retrievalkit.toml"
    path.write_text(text, encoding="utf-8")
    return rk.load_config(path)


SMALL = """
[sweeps.rrf]
retriever = "both"
grid = { k = [1, 60], "stemmed.k1" = [0.9, 2.0] }
"""


@pytest.fixture(scope="module")
def demo() -> GoldenQuestionSet:
    return rk.load_set(DEMO / "golden.jsonl")


# --- the split ---------------------------------------------------------------------------


def _questions(draw: Any) -> list[ClusteredQuestion]:
    count = draw(st.integers(4, 60))
    forms = draw(st.lists(st.sampled_from([None, "MATCH", "GAP"]), min_size=count, max_size=count))
    clusters = draw(
        st.lists(st.one_of(st.none(), st.sampled_from("abcdefg")), min_size=count, max_size=count)
    )
    return [
        ClusteredQuestion(
            id=f"q{i}",
            question=f"question {i}",
            form=None if form is None else QuestionForm(form),
            expected=("d",),
            cluster=cluster,
        )
        for i, (form, cluster) in enumerate(zip(forms, clusters, strict=True))
    ]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), share=st.floats(0.1, 0.6), seed=st.integers(0, 1000))
def test_split_keeps_clusters_whole_and_each_form_near_its_share(
    data: Any, share: float, seed: int
) -> None:
    questions = _questions(data.draw)
    tuning, held = sweep_split.split(questions, share, seed)
    assert sorted(tuning + held) == list(range(len(questions)))
    assert sweep_split.split(questions, share, seed) == (tuning, held)  # seeded
    held_set = set(held)
    for unit in sweep_split.units(questions):
        assert len({index in held_set for index in unit}) == 1, "a cluster was split"
    # Within each form (of a unit's first question), the held-out count is as close to
    # the share as whole units allow.
    for form in {q.form for q in questions}:
        units = [u for u in sweep_split.units(questions) if questions[u[0]].form == form]
        biggest = max((len(u) for u in units), default=0)
        taken = sum(len(u) for u in units if u[0] in held_set)
        in_form = sum(len(u) for u in units)
        assert abs(taken - share * in_form) <= biggest


@settings(max_examples=40, deadline=None)
@given(data=st.data(), count=st.integers(2, 5), seed=st.integers(0, 1000))
def test_folds_cover_every_question_once_and_keep_clusters(
    data: Any, count: int, seed: int
) -> None:
    questions = _questions(data.draw)
    fold_of = sweep_split.folds(questions, count, seed)
    assert len(fold_of) == len(questions) and set(fold_of) <= set(range(count))
    for unit in sweep_split.units(questions):
        assert len({fold_of[i] for i in unit}) == 1
    # Balanced within one unit per form, hence overall within the number of forms' units.
    sizes = [fold_of.count(f) for f in range(count)]
    largest = max(len(u) for u in sweep_split.units(questions))
    assert max(sizes) - min(sizes) <= 3 * largest


def test_questions_without_a_cluster_field_split_by_question(demo: GoldenQuestionSet) -> None:
    _, held = sweep_split.split(demo.questions, 0.3, 7)
    assert len(held) == pytest.approx(0.3 * len(demo.questions), abs=2)
    assert sweep_split.units(demo.questions) == [[i] for i in range(len(demo.questions))]


# --- the sweep ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, demo: GoldenQuestionSet) -> Any:
    config = _config(tmp_path_factory.mktemp("small"), SMALL)
    return config, rk.sweep(demo, "rrf", config=config, **FAST)


def test_every_configuration_is_reported_and_the_best_on_tuning_wins(small: Any) -> None:
    _, result = small
    assert [c.options for c in result.configurations] == [
        {"k": 1, "stemmed.k1": 0.9},
        {"k": 1, "stemmed.k1": 2.0},
        {"k": 60, "stemmed.k1": 0.9},
        {"k": 60, "stemmed.k1": 2.0},
    ]
    scores = [c.metrics["rr"].mean for c in result.configurations]
    assert result.winner.index == scores.index(max(scores))
    assert result.winner.tuning == result.configurations[result.winner.index].metrics["rr"]
    assert result.tuning_questions + result.held_out_questions == result.questions
    for each in result.configurations:
        p50, p95 = each.latency_ms["p50"], each.latency_ms["p95"]
        assert p50 is not None and p95 is not None and 0 <= p50 <= p95
    assert [c.p_holm for c in result.configurations] == holm(
        [c.p_value for c in result.configurations]
    )


def test_the_winner_is_confirmed_as_evaluate_would_on_the_held_out_questions(
    small: Any, demo: GoldenQuestionSet
) -> None:
    """The confirmation is the paired test of two ordinary evaluations on the held-out
    share: the winner's options configured by hand, and the configured retriever."""
    config, result = small
    _, held = sweep_split.split(demo.questions, 0.3, result.seed)
    held_set = GoldenQuestionSet(demo.name, [demo.questions[i] for i in held])
    options = result.winner.options
    retrievers = dict(config.retrievers)
    retrievers["both"] = attrs.evolve(
        retrievers["both"], options={**retrievers["both"].options, "k": options["k"]}
    )
    retrievers["stemmed"] = attrs.evolve(
        retrievers["stemmed"],
        options={**retrievers["stemmed"].options, "k1": options["stemmed.k1"]},
    )
    tuned = attrs.evolve(config, retrievers=retrievers)
    winner = rk.evaluate(held_set, "both", config=tuned, git_commit=None, seed=result.seed, **FAST)
    configured = rk.evaluate(
        held_set, "both", config=config, git_commit=None, seed=result.seed, **FAST
    )
    test = paired_test(
        configured.outcomes.values("rr"),
        winner.outcomes.values("rr"),
        resamples=200,
        seed=result.seed,
    )
    confirmation = result.winner.confirmation
    assert (confirmation.difference, confirmation.low, confirmation.high) == (
        test.difference,
        test.low,
        test.high,
    )
    assert confirmation.p_value == test.p_value and confirmation.n == len(held)
    assert result.winner.held_out.mean == winner.metrics["rr"].mean


def test_shared_first_stages_give_exactly_what_asking_again_gives(
    small: Any, demo: GoldenQuestionSet
) -> None:
    config, shared = small
    fresh = rk.sweep(demo, "rrf", config=config, share_stages=False, **FAST)
    assert shared.reused_answers > 0 and fresh.reused_answers == 0
    for one, other in zip(shared.configurations, fresh.configurations, strict=True):
        assert one.options == other.options
        assert one.metrics == other.metrics
        assert (one.difference, one.p_value) == (other.difference, other.p_value)
    assert shared.winner.confirmation == fresh.winner.confirmation


def test_a_reused_answer_is_a_copy_the_caller_may_change(tmp_path: Path) -> None:
    from retrievalkit.pipeline.engine.shared_answers import Remembering, SharedRetrievers

    class Scored:
        def retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
            return [("a", 2.0), ("b", 1.0)][:limit]

    remembering = Remembering(Scored(), SharedRetrievers())
    first = remembering.retrieve_scored("q", 2)
    first.append(("x", 0.0))
    assert remembering.retrieve_scored("q", 2) == [("a", 2.0), ("b", 1.0)]
    assert remembering.retrieve_scored("q", 1) == [("a", 2.0)]
    assert not hasattr(remembering, "retrieve_many")  # only what the retriever has


def test_folds_cross_validate_the_choice(tmp_path: Path, demo: GoldenQuestionSet) -> None:
    config = _config(
        tmp_path,
        """
[sweeps.cv]
retriever = "both"
grid = { k = [1, 60] }
folds = 3
""",
    )
    result = rk.sweep(demo, "cv", config=config, **FAST)
    assert result.method == "folds" and len(result.winner.folds) == 3
    assert result.winner.held_out.n == result.winner.confirmation.n
    # Each question's held-out value comes from the configuration its fold's others chose.
    fold_of = np.array(sweep_split.folds(demo.questions, 3, result.seed))
    values = {
        tuple(c.options.items()): rk.evaluate(
            demo,
            "both",
            config=attrs.evolve(
                config,
                retrievers={
                    **config.retrievers,
                    "both": attrs.evolve(
                        config.retrievers["both"],
                        options={**config.retrievers["both"].options, **c.options},
                    ),
                },
            ),
            git_commit=None,
            **FAST,
        ).outcomes.values("rr")
        for c in result.configurations
    }
    cross = np.full(len(demo.questions), np.nan)
    for fold, options in enumerate(result.winner.folds):
        chosen = values[tuple(options.items())]
        cross[fold_of == fold] = chosen[fold_of == fold]
    defined = cross[~np.isnan(cross)]
    assert result.winner.held_out.mean == pytest.approx(defined.mean(), abs=1e-12)


def test_successive_halving_keeps_the_best_third_on_growing_questions(
    tmp_path: Path, demo: GoldenQuestionSet
) -> None:
    config = _config(
        tmp_path,
        """
[sweeps.big]
retriever = "both"
grid = { k = [1, 10, 60], depth = [5, 20, 50], "stemmed.b" = [0.2, 0.4, 0.8] }
halving = true
""",
    )
    result = rk.sweep(demo, "big", config=config, **FAST)
    rounds = [(r.configurations, r.questions) for r in result.halving]
    assert [count for count, _ in rounds] == [27, 9, 3]
    assert rounds[-1][1] == result.tuning_questions
    assert rounds[0][1] <= rounds[1][1] < rounds[2][1]
    last = [i for i, c in enumerate(result.configurations) if c.round == 2]
    assert len(last) == 3 and result.winner.index in last
    for each in result.configurations:
        assert each.questions == rounds[each.round][1]
    # Each survivor was among the best third of the round before.
    second = [c for c in result.configurations if c.round >= 1]
    assert len(second) == 9


def test_rounds_shrink_by_three_and_end_on_every_question() -> None:
    assert _rounds(81, 1000) == [(81, 37), (27, 111), (9, 333), (3, 1000)]
    assert _rounds(4, 40) == [(4, 30), (2, 40)]
    assert _rounds(100, 20)[-1] == (2, 20)


def test_an_interrupted_sweep_resumes_without_asking_again(
    tmp_path: Path, demo: GoldenQuestionSet
) -> None:
    config = _config(tmp_path, SMALL)
    spec = config.sweeps["rrf"]
    settings_ = Settings(ks=(1, 3, 5, 10), overfetch=3, resamples=200, confidence=0.95)
    progress = tmp_path / "progress.jsonl"
    asked: list[int] = []

    def interrupted(resolved: Any, questions: Sequence[GoldenQuestion], s: Settings) -> Any:
        if len(asked) == 3:
            raise KeyboardInterrupt
        asked.append(len(questions))
        return ask_locally(resolved, questions, s)

    with pytest.raises(KeyboardInterrupt):
        run_sweep(demo, spec, config, settings_, progress_file=progress, asker=interrupted)
    assert progress.is_file()
    lines = progress.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 + 3
    # A crash mid-line leaves a broken last line; it is ignored.
    with progress.open("a", encoding="utf-8") as handle:
        handle.write('{"key": "cut sh')
    again: list[int] = []

    def counting(resolved: Any, questions: Sequence[GoldenQuestion], s: Settings) -> Any:
        again.append(len(questions))
        return ask_locally(resolved, questions, s)

    resumed = run_sweep(demo, spec, config, settings_, progress_file=progress, asker=counting)
    whole = run_sweep(demo, spec, config, settings_)
    assert resumed.resumed_answers == sum(asked)
    # The configured retriever, 4 configurations, then the winner and the configured
    # retriever on the held-out questions: 7 askings, 3 of them done before.
    assert len(again) == 7 - 3
    assert [c.metrics for c in resumed.configurations] == [c.metrics for c in whole.configurations]
    assert resumed.winner.confirmation == whole.winner.confirmation
    assert not progress.exists()  # done: the results are in the report


def test_a_progress_file_of_another_set_is_started_afresh(
    tmp_path: Path, demo: GoldenQuestionSet
) -> None:
    config = _config(tmp_path, SMALL)
    progress = tmp_path / "progress.jsonl"
    progress.write_text(
        json.dumps({"format": "retrievalkit-sweep-progress/1", "identity": "other"})
        + "\n"
        + json.dumps({"key": "x", "answers": {"q01": [["d"], 1.0, None, 1]}})
        + "\n",
        encoding="utf-8",
    )
    result = rk.sweep(demo, "rrf", config=config, progress_file=progress, **FAST)
    assert result.resumed_answers == 0


def test_the_pareto_front_holds_exactly_the_undominated() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        quality = rng.integers(0, 5, 12) / 4
        latency = rng.integers(0, 5, 12).astype(float)
        configurations = [
            Configuration({}, {"rr": rk.MetricValue(float(q), None, 1)}, {"p50": float(lat)}, 1)
            for q, lat in zip(quality, latency, strict=True)
        ]
        front = _pareto(configurations, "rr")
        for i in range(12):
            beaten = any(
                quality[j] >= quality[i]
                and latency[j] <= latency[i]
                and (quality[j] > quality[i] or latency[j] < latency[i])
                for j in range(12)
            )
            assert (i in front) == (not beaten)


# --- the configuration table ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "field", "message"),
    [
        ('retriever = "both"\ngrid = { k = 3 }', "sweeps.s.grid.k", "non-empty list"),
        ('retriever = "both"\ngrid = { k = [] }', "sweeps.s.grid.k", "non-empty list"),
        ("grid = { k = [1] }", "sweeps.s.retriever", "missing"),
        ('retriever = "both"', "sweeps.s.grid", "option = [values"),
        ('retriever = "both"\ngrid = { k = [1] }\nselect = "mrr@x"', "sweeps.s.select", ""),
        ('retriever = "both"\ngrid = { k = [1] }\nconfirm = 1.5', "sweeps.s.confirm", "share"),
        ('retriever = "both"\ngrid = { k = [1] }\nfolds = 1', "sweeps.s.folds", ">= 2"),
        (
            'retriever = "both"\ngrid = { k = [1] }\nfolds = 3\nconfirm = 0.2',
            "sweeps.s.folds",
            "not both",
        ),
        ('retriever = "both"\ngrid = { k = [1] }\nsearch = "x"', "sweeps.s.search", "unknown"),
    ],
)
def test_a_bad_sweep_table_names_its_key_and_line(
    tmp_path: Path, table: str, field: str, message: str
) -> None:
    import tomllib

    path = tmp_path / "retrievalkit.toml"
    path.write_text(f"[sweeps.s]\n{table}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        parse_config(tomllib.loads(path.read_text()), path)
    assert caught.value.field == field and message in str(caught.value)
    assert caught.value.line is not None


def test_a_dotted_option_must_reach_a_retriever_or_a_table(
    tmp_path: Path, demo: GoldenQuestionSet
) -> None:
    config = _config(
        tmp_path,
        """
[sweeps.wrong]
retriever = "both"
grid = { "dense.k1" = [1.0, 2.0] }
""",
    )
    with pytest.raises(InputError, match="stemmed, plain") as caught:
        rk.sweep(demo, "wrong", config=config, **FAST)
    assert caught.value.field == "sweeps.wrong.grid.dense.k1"


# --- the command line ----------------------------------------------------------------------


def test_the_command_writes_json_and_the_output_dir(cli: RunCli, tmp_path: Path) -> None:
    _config(tmp_path, SMALL)
    result = cli(
        "sweep", "rrf", "--set", str(DEMO / "golden.jsonl"), "--format", "json",
        "--resamples", "200", "--output-dir", "out",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert {"configurations", "winner", "pareto"} <= set(document)
    assert set(document["configurations"][0]) >= {"options", "metrics", "latency_ms"}
    assert set(document["winner"]["confirmation"]) >= {
        "difference", "low", "high", "p_value", "verdict"
    }  # fmt: skip
    assert document["winner"]["tuning"]["mean"] is not None
    assert json.loads((tmp_path / "out" / "sweep.json").read_text()) == document
    assert "## Winner" in (tmp_path / "out" / "report.md").read_text()
    assert not (tmp_path / "out" / "sweep-progress.jsonl").exists()
    table = cli("sweep", "rrf", "--set", str(DEMO / "golden.jsonl"), "--resamples", "200")
    assert table.returncode == 0, table.stderr
    assert "winner #" in table.stdout and "◆" in table.stdout


def test_an_unknown_sweep_is_exit_2_with_the_known_ones(cli: RunCli, tmp_path: Path) -> None:
    _config(tmp_path, SMALL)
    result = cli("sweep", "nope", "--set", str(DEMO / "golden.jsonl"))
    assert result.returncode == 2
    assert "no sweep 'nope'" in result.stderr and "rrf" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_progress_file_lives_beside_the_store_or_in_the_output_dir() -> None:
    import argparse

    from retrievalkit.cli.commands.sweep import progress_path

    args = argparse.Namespace(name="my sweep", output_dir=None)
    assert progress_path(args, "sqlite:///runs/r.sqlite3") == Path(
        "runs/sweep-my_sweep.progress.jsonl"
    )
    assert progress_path(args, "jsonl:////abs/r.jsonl") == Path(
        "/abs/sweep-my_sweep.progress.jsonl"
    )
    assert progress_path(args, "memory:") == Path(".retrievalkit/sweep-my_sweep.progress.jsonl")
    args.output_dir = "out"
    assert progress_path(args, "memory:") == Path("out/sweep-progress.jsonl")


def test_retrievals_are_kept_per_configuration_and_question(tmp_path: Path) -> None:
    """What the progress file stores reads back as the same retrieval."""
    from retrievalkit.pipeline.sweeps.sweep import Progress

    path = tmp_path / "p.jsonl"
    Progress(path, "id").add("k", {"q": Retrieval(("a", "b"), 1.5, "Boom: x", 2)})
    assert Progress(path, "id").answers == {"k": {"q": Retrieval(("a", "b"), 1.5, "Boom: x", 2)}}
    assert Progress(path, "another").answers == {}
