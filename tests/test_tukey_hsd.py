"""The randomised Tukey HSD (`retrievalkit.stats.tukey`) and ``compare --correction tukey``:
a worked example enumerated exactly, the family-wise error under the null, a loose check
against the classical Tukey HSD, and the option end to end."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import RunCli
from scipy.stats import tukey_hsd as classical_tukey_hsd

import retrievalkit as rk
from retrievalkit.demo import DEMO_CORPUS
from retrievalkit.errors import InputError
from retrievalkit.metrics.scoring import as_columns, metric_column, positions_of
from retrievalkit.pipeline.gating.comparison import Side, compare_records
from retrievalkit.render.comparison import comparison_document, render_comparison_markdown
from retrievalkit.stats.paired import DEFAULT_PERMUTATIONS
from retrievalkit.stats.tukey import tukey_hsd

#: 4 questions x 3 systems (A, B, C). See `test_the_worked_example_matches_full_enumeration`.
WORKED = np.array(
    [
        [0.9, 0.5, 0.1],
        [0.8, 0.6, 0.2],
        [1.0, 0.3, 0.3],
        [0.7, 0.7, 0.0],
    ]
)


def enumerated_tukey(scores: np.ndarray) -> np.ndarray:
    """The exact Tukey HSD p-values: every one of the (k!)^n within-question permutations,
    the share whose range of system sums is at least each pair's observed difference."""
    count, systems = scores.shape
    orders = list(itertools.permutations(range(systems)))
    ranges = []
    for choice in itertools.product(orders, repeat=count):
        sums = [sum(scores[q, choice[q][s]] for q in range(count)) for s in range(systems)]
        ranges.append(max(sums) - min(sums))
    spread = np.array(ranges)
    sums = scores.sum(axis=0)
    exact = np.ones((systems, systems))
    for i, j in itertools.combinations(range(systems), 2):
        exact[i, j] = exact[j, i] = np.mean(spread >= abs(sums[i] - sums[j]) - 1e-9)
    return exact


def test_the_worked_example_matches_full_enumeration() -> None:
    """Sums A 3.4, B 2.1, C 0.6; the largest range any shuffle reaches is 3.4 - 0.6 = 2.8
    (every question's top score to one system, its bottom to another). For each of the 6
    ordered (top, bottom) pairs of systems, q3's two 0.3 and q4's two 0.7 give 2 x 2
    permutations: 24 of the 6^4 = 1296, so A-C's exact p is 24/1296 = 1/54."""
    exact = enumerated_tukey(WORKED)
    assert exact[0, 2] == pytest.approx(1 / 54)
    permutations = 20_000
    test = tukey_hsd(WORKED, permutations=permutations, seed=7)
    assert test.questions == 4 and test.permutations == permutations
    assert test.means == pytest.approx([0.85, 0.525, 0.15])
    for i, j in itertools.combinations(range(3), 2):
        p = exact[i, j]
        # +1 correction: the estimate of p is (count + 1) / (B + 1); 4 standard errors.
        error = math.sqrt(p * (1 - p) / permutations) + 1 / permutations
        assert abs(test.p_values[i, j] - p) <= 4 * error, (i, j)
        assert test.p_values[i, j] == test.p_values[j, i]
    assert np.all(np.diag(test.p_values) == 1.0)
    assert test.floor == 1 / (permutations + 1)


def test_the_same_seed_gives_the_same_p_values_and_another_seed_others() -> None:
    rng = np.random.default_rng(3)
    scores = rng.random((40, 5))
    first = tukey_hsd(scores, permutations=2_000, seed=1)
    again = tukey_hsd(scores, permutations=2_000, seed=1)
    other = tukey_hsd(scores, permutations=2_000, seed=2)
    assert np.array_equal(first.p_values, again.p_values)
    assert not np.array_equal(first.p_values, other.p_values)
    assert np.abs(first.p_values - other.p_values).max() < 0.1


def test_questions_without_every_value_or_without_variation_are_handled() -> None:
    """A question with an undefined score (NaN) cannot be shuffled and is left out; one
    where all systems score the same shifts every sum alike and changes no p-value."""
    with_constant = np.vstack([WORKED, [[0.4, 0.4, 0.4]], [[0.2, np.nan, 0.9]]])
    test = tukey_hsd(with_constant, permutations=3_000, seed=4)
    plain = tukey_hsd(WORKED, permutations=3_000, seed=4)
    assert test.questions == 5
    assert np.array_equal(test.p_values, plain.p_values)
    empty = tukey_hsd(np.full((3, 3), np.nan), permutations=100, seed=4)
    assert empty.questions == 0 and np.isnan(empty.p_values).all()
    assert empty.p_values.shape == (3, 3) and empty.means.shape == (3,)
    assert np.isnan(empty.means).all()
    assert empty.permutations == 100 and empty.floor == 1 / 101
    with pytest.raises(ValueError, match="questions x systems"):
        tukey_hsd(np.ones((4, 1)))


def test_two_systems_are_the_paired_permutation_test_by_full_enumeration() -> None:
    """Two systems are the smallest family: their p-value is the share of the 2^n sign
    flips whose |sum of differences| reaches the observed one."""
    pair = WORKED[:, [0, 1]]
    exact = enumerated_tukey(pair)[0, 1]
    flips = [
        abs(sum(sign * d for sign, d in zip(signs, pair[:, 0] - pair[:, 1], strict=True)))
        for signs in itertools.product((1, -1), repeat=4)
    ]
    assert exact == pytest.approx(np.mean(np.array(flips) >= 1.3 - 1e-9))
    permutations = 20_000
    p = tukey_hsd(pair, permutations=permutations, seed=2).p_values[0, 1]
    assert abs(p - exact) <= 4 * math.sqrt(exact * (1 - exact) / permutations) + 1 / permutations


def test_a_pair_no_shuffle_can_fall_short_of_has_p_exactly_1() -> None:
    """One question: every shuffle's range is the row's range, 1.0, so no pair's
    difference (0.1, 0.9, 1.0, and 0 for the two equal systems) exceeds any shuffle's:
    each p is (B + 1) / (B + 1) = 1, whatever B, the single permutation included."""
    row = np.array([[1.0, 0.9, 0.0, 0.0]])
    for permutations in (1, 7, 1000):
        test = tukey_hsd(row, permutations=permutations, seed=1)
        assert np.array_equal(test.p_values, np.ones((4, 4))), permutations
        assert test.floor == 1 / (permutations + 1) and test.permutations == permutations
    with pytest.raises(ValueError, match="permutations"):
        tukey_hsd(row, permutations=0)


def test_a_shuffle_within_the_rounding_tolerance_of_the_difference_reaches_it() -> None:
    """Two systems, two questions ([big, 0] and [s, 0]): half the shuffles have range
    big + s (the observed one), half big - s. A range within 1e-9 x max(1, difference)
    below the observed difference counts as reaching it (sums in another order differ in
    the last bits), so p is 1 exactly; one further below does not, so p is near 0.5."""

    def p_of(big: float, small: float) -> float:
        scores = np.array([[big, 0.0], [small, 0.0]])
        return float(tukey_hsd(scores, permutations=2_000, seed=3).p_values[0, 1])

    # 2s against 1e-9 x max(1, 1 + s): within at 0.5e-9, not at 1.5e-9.
    assert p_of(1.0, 0.25e-9) == 1.0
    assert 0.4 < p_of(1.0, 0.75e-9) < 0.6
    # The tolerance grows with the difference: 1e-9 x 1000 = 1e-6 against 2s = 5e-7.
    assert p_of(1000.0, 2.5e-7) == 1.0
    assert 0.4 < p_of(1000.0, 2.5e-6) < 0.6


def test_zero_one_scores_as_booleans_or_integers_are_the_same_test() -> None:
    hits = np.random.default_rng(8).random((30, 3)) < np.array([0.7, 0.5, 0.3])
    floats = tukey_hsd(hits.astype(np.float64), permutations=500, seed=6)
    for given in (hits, hits.astype(int), hits.tolist()):
        same = tukey_hsd(given, permutations=500, seed=6)
        assert np.array_equal(same.p_values, floats.p_values)
        assert np.array_equal(same.means, floats.means)


def test_the_family_wise_error_under_the_null_is_at_most_alpha() -> None:
    """Seeded: 400 experiments of 6 equal systems on 25 questions (a question effect plus
    noise); the share with any pair's adjusted p below 0.05 must be at most 0.05 plus
    three binomial standard errors (0.033), and is near 0.05 (the test is exact, not
    merely conservative). Unadjusted, 15 pairs would make it far larger."""
    rng = np.random.default_rng(2026)
    trials, alpha = 400, 0.05
    family_errors = unadjusted_errors = 0
    for trial in range(trials):
        difficulty = rng.random((25, 1))
        scores = np.clip(difficulty + rng.normal(0, 0.2, (25, 6)), 0, 1)
        test = tukey_hsd(scores, permutations=500, seed=trial)
        pairs = test.p_values[np.triu_indices(6, 1)]
        family_errors += bool((pairs < alpha).any())
        # Each pair alone: the two-system Tukey test is the paired permutation test.
        unadjusted_errors += any(
            tukey_hsd(scores[:, [i, j]], permutations=200, seed=trial).p_values[0, 1] < alpha
            for i, j in itertools.combinations(range(6), 2)
        )
    rate = family_errors / trials
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)
    assert rate >= 0.015
    assert unadjusted_errors / trials > 0.2


def test_it_is_close_to_the_classical_tukey_hsd_without_question_effects() -> None:
    """Loose sanity check, not the same test: scipy.stats.tukey_hsd (what ranx's
    ``stat_test="tukey"`` calls) treats the systems' scores as independent groups with a
    pooled normal variance; with independent normal scores and no question effect the
    within-question permutation distribution of the range is close to the studentized
    range's. One system is shifted so that the p-values spread over (0, 1)."""
    rng = np.random.default_rng(9)
    scores = rng.normal(0.0, 1.0, (300, 4))
    scores[:, 3] += 0.2
    ours = tukey_hsd(scores, permutations=20_000, seed=9).p_values
    theirs = classical_tukey_hsd(*scores.T).pvalue
    pairs = np.triu_indices(4, 1)
    assert np.abs(ours[pairs] - theirs[pairs]).max() < 0.04
    assert (ours[pairs] < 0.05).any() and (ours[pairs] > 0.5).any()


def test_a_clearly_better_system_is_found_and_equal_ones_are_not() -> None:
    rng = np.random.default_rng(5)
    scores = rng.random((200, 4))
    scores[:, 0] = np.clip(scores[:, 0] + 0.25, 0, 1)
    p = tukey_hsd(scores, permutations=5_000, seed=5).p_values
    assert p[0, 1] < 0.001 and p[0, 2] < 0.001 and p[0, 3] < 0.001
    assert min(p[1, 2], p[1, 3], p[2, 3]) > 0.01


# --- in compare ------------------------------------------------------------------------


def three_sides() -> list[Side]:
    from test_many_systems import SIDES

    return list(SIDES)


STATS: dict[str, Any] = {"resamples": 300, "confidence": 0.95, "seed": 5}


def scores_of(sides: list[Side], metric: str) -> np.ndarray:
    columns = [as_columns(side.record.outcomes) for side in sides]
    shared = list(columns[0].question_ids)
    return np.column_stack(
        [metric_column(column, metric)[positions_of(column, shared)] for column in columns]
    )


def test_compare_all_pairs_with_tukey_adjusts_per_metric_then_over_the_metrics() -> None:
    sides = three_sides()
    comparison = compare_records(sides, pairing="all-pairs", correction="tukey", **STATS)
    assert (comparison.correction, comparison.family) == ("tukey", "pairs and metrics")
    indices = {side.label: index for index, side in enumerate(sides)}
    tested = {delta.metric for pair in comparison.pairs for delta in pair.metrics}
    metrics = len(tested)
    assert metrics > 1
    for pair in comparison.pairs:
        left, right = indices[pair.baseline], indices[pair.candidate]
        for delta in pair.metrics:
            test = tukey_hsd(
                scores_of(sides, delta.metric), permutations=DEFAULT_PERMUTATIONS, seed=5
            )
            assert delta.p_adjusted == pytest.approx(
                min(1.0, metrics * float(test.p_values[left, right]))
            )
            assert delta.p_holm is None
            assert delta.p_floor == pytest.approx(min(1.0, metrics * test.floor))
            assert delta.significant == (delta.p_adjusted < 0.05)
    worse = next(pair for pair in comparison.pairs if pair.candidate == "worse")
    hit1 = next(delta for delta in worse.metrics if delta.metric == "hit@1")
    # base 1.0 against worse 0.667 on hit@1: real, but not beyond 20-odd metrics' Bonferroni.
    assert hit1.p_value is not None and hit1.p_adjusted is not None
    assert hit1.p_adjusted > hit1.p_value
    document = comparison_document(comparison)
    assert document["correction"] == "tukey" and document["family"] == "pairs and metrics"
    assert {"p_value", "p_adjusted", "p_holm"} <= set(document["pairs"][0]["metrics"][0])
    markdown = render_comparison_markdown(comparison)
    assert "p (Tukey)" in markdown and "randomised Tukey HSD" in markdown
    assert "Tukey-adjusted p <" in markdown
    assert "p (Tukey)" in str(comparison)


def test_with_the_baseline_pairing_tukey_corrects_each_metric_over_the_systems() -> None:
    sides = three_sides()
    comparison = compare_records(sides, correction="tukey", **STATS)
    assert (comparison.correction, comparison.family) == ("tukey", "systems")
    for pair in comparison.pairs:
        right = [side.label for side in sides].index(pair.candidate)
        for delta in pair.metrics:
            test = tukey_hsd(
                scores_of(sides, delta.metric), permutations=DEFAULT_PERMUTATIONS, seed=5
            )
            assert delta.p_adjusted == pytest.approx(float(test.p_values[0, right]))


def test_the_api_takes_the_correction_and_refuses_others() -> None:
    records = [side.record for side in three_sides()]
    result = rk.compare(records, all_pairs=True, correction="tukey", seed=5)
    assert result.correction == "tukey"
    again = rk.compare(records, all_pairs=True, correction="tukey", seed=5)
    assert comparison_document(result)["pairs"] == comparison_document(again)["pairs"]
    assert rk.compare(records, all_pairs=True, correction="holm").correction == "holm"
    for bad in ("bonferroni", "Tukey", 3):
        with pytest.raises(InputError, match="unknown correction") as caught:
            rk.compare(records, all_pairs=True, correction=bad)
        assert caught.value.field == "--correction"
    with pytest.raises(InputError, match="clusters") as clustered:
        rk.compare(records, all_pairs=True, correction="tukey", cluster_by="expected")
    assert clustered.value.field == "--correction"


# --- on the command line ---------------------------------------------------------------


@pytest.fixture
def three_retrievers(tmp_path: Path) -> Path:
    titles = tmp_path / "titles.jsonl"
    with titles.open("w", encoding="utf-8") as handle:
        for line in DEMO_CORPUS.read_text(encoding="utf-8").splitlines():
            document = json.loads(line)
            document["text"] = ""
            handle.write(json.dumps(document) + "\n")
    (tmp_path / "retrievalkit.toml").write_text(
        f"""
[retrievers.titles-only]
plugin = "bm25"
corpus = "{titles}"
doc_id_separator = "#"

[retrievers.loose-bm25]
plugin = "bm25"
corpus = "{DEMO_CORPUS}"
doc_id_separator = "#"
k1 = 3.0
b = 1.0
stemmer = ""
""",
        encoding="utf-8",
    )
    return tmp_path


def test_compare_all_pairs_correction_tukey_on_stored_runs(
    cli: RunCli, three_retrievers: Path
) -> None:
    made = cli(
        "compare", "--set", "demo", "--retriever", "bm25-demo", "--retriever", "titles-only",
        "--retriever", "loose-bm25", "--format", "json",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    systems = json.loads(made.stdout)["systems"]
    ids = [system["run_id"] for system in systems]
    runs = [part for run_id in ids for part in ("--run", run_id)]
    result = cli("compare", "--all-pairs", "--correction", "tukey", *runs, "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["correction"] == "tukey" and document["family"] == "pairs and metrics"
    assert document["pairing"] == "all-pairs" and len(document["pairs"]) == 3
    for pair in document["pairs"]:
        for delta in pair["metrics"]:
            assert delta["p_holm"] is None
            if delta["p_value"] is None:
                assert delta["p_adjusted"] is None
                continue
            assert 0 < delta["p_adjusted"] <= 1
            if delta["verdict"] != "unresolvable":
                assert delta["significant"] == (delta["p_adjusted"] < 0.05)
    # The same stored runs through the Python API, with the same (default) seed: the same.
    # Saved to the store the configuration names, a path relative to the project.
    stored = three_retrievers / systems[0]["saved_to"].removeprefix("sqlite:///")
    store = rk.open_store(f"sqlite:///{stored}")
    records = [store.get(run_id) for run_id in ids]
    assert all(record is not None for record in records)
    api = rk.compare(records, all_pairs=True, correction="tukey")  # type: ignore[arg-type]
    assert [[delta["p_adjusted"] for delta in pair["metrics"]] for pair in document["pairs"]] == [
        [delta.p_adjusted for delta in pair.metrics] for pair in api.pairs
    ]
    markdown = cli("compare", "--control", "bm25-demo", "--correction", "tukey", *runs,
                   "--format", "markdown")  # fmt: skip
    assert markdown.returncode == 0, markdown.stderr
    assert "p (Tukey)" in markdown.stdout
    table = cli("compare", "--all-pairs", "--correction", "tukey", *runs)
    assert table.returncode == 0, table.stderr
    assert "p (Tukey)" in table.stdout


def test_bad_correction_values_exit_2_naming_the_option(
    cli: RunCli, three_retrievers: Path
) -> None:
    made = cli(
        "compare", "--set", "demo", "--retriever", "bm25-demo", "--retriever", "titles-only",
        "--format", "json",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    runs = [
        part
        for system in json.loads(made.stdout)["systems"]
        for part in ("--run", system["run_id"])
    ]
    for bad in ("bonferroni", "TUKEY", ""):
        refused = cli("compare", "--all-pairs", "--correction", bad, *runs)
        assert refused.returncode == 2, refused.stderr
        assert "--correction" in refused.stderr and "holm, tukey" in refused.stderr
    clustered = cli(
        "compare", "--all-pairs", "--correction", "tukey", "--cluster-by", "expected", *runs
    )
    assert clustered.returncode == 2
    assert "--correction" in clustered.stderr and "clusters" in clustered.stderr
