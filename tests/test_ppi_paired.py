"""Judge-corrected comparisons (PPI++ on the paired difference D = Y_A - Y_B and its judge
counterpart Dhat = J_A - J_B), against ppi-python and by seeded simulation.

The estimator is the one-run PPI++ of `retrievalkit.stats.ppi` applied to differences,
so ppi-python's ``ppi_mean_pointestimate`` and ``ppi_mean_ci`` are given D and Dhat
directly. The two documented differences of the one-run estimator carry over (see
tests/test_oracles_ppi.py): the weight's covariance divides by n - 1 (ppi-python's by
n), and the interval is a BCa bootstrap widened by sqrt(n/(n-1)) t_{n-1} / z, compared
with ppi-python's normal interval at the same weight times that widening.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import ppi_py
import ppi_py.ppi
import pytest
from scipy.stats import norm, t

import retrievalkit as rk
from retrievalkit.stats.ppi_paired import corrected_difference, labelling_priority

_WEIGHT = "lam" if "lam" in inspect.signature(ppi_py.ppi_mean_ci).parameters else "lhat"
_calc_lam_glm = getattr(ppi_py.ppi, "_calc_lam_glm", None) or ppi_py.ppi._calc_lhat_glm

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _systems(
    questions: int, labelled: int, seed: int, *, judge: str = "good", gap: float = 0.05
) -> tuple[Arrays, float]:
    """(judged_a, judged_b, human_a, human_b) and the true mean difference of the
    population the questions are drawn from (what PPI's interval is about).

    A's true value is Beta(2, 3), B's A's minus ``gap`` plus noise; the good judge is
    lenient on both (+0.1) with small noise, so its differences track the humans'; the
    useless one grades independently of the truth. Humans label a random ``labelled``.
    """
    rng = np.random.default_rng((seed, questions, labelled))
    true_a = rng.beta(2, 3, questions)
    true_b = np.clip(true_a - gap + rng.normal(0, 0.15, questions), 0, 1)
    if judge == "good":
        judged_a = np.clip(true_a + 0.1 + rng.normal(0, 0.05, questions), 0, 1)
        judged_b = np.clip(true_b + 0.1 + rng.normal(0, 0.05, questions), 0, 1)
    else:
        judged_a, judged_b = rng.beta(2, 3, questions), rng.beta(2, 3, questions)
    human_a, human_b = np.full(questions, np.nan), np.full(questions, np.nan)
    picked = rng.choice(questions, labelled, replace=False)
    human_a[picked], human_b[picked] = true_a[picked], true_b[picked]
    return (judged_a, judged_b, human_a, human_b), _truth(gap)


def _truth(gap: float, draws: int = 4_000_000) -> float:
    """E[A - B] of `_systems`' population, by one large seeded draw (error about 1e-4)."""
    if gap not in _TRUTHS:
        rng = np.random.default_rng(99)
        a = rng.beta(2, 3, draws)
        _TRUTHS[gap] = float((a - np.clip(a - gap + rng.normal(0, 0.15, draws), 0, 1)).mean())
    return _TRUTHS[gap]


_TRUTHS: dict[float, float] = {}


def _split(arrays: Arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(D on the labelled, Dhat on the labelled, Dhat on the rest), as ppi-python takes them."""
    judged_a, judged_b, human_a, human_b = arrays
    labelled = ~np.isnan(human_a)
    d, dhat = human_a - human_b, judged_a - judged_b
    return d[labelled], dhat[labelled], dhat[~labelled]


def _ppi_lambda(y: np.ndarray, j: np.ndarray, rest: np.ndarray) -> float:
    centre = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, j, rest, **{_WEIGHT: 1}))[0])
    grads = [np.reshape(values - centre, (-1, 1)) for values in (y, j, rest)]
    return float(np.ravel(_calc_lam_glm(*grads, np.eye(1), clip=False))[0])


def _ppi_ci(y: np.ndarray, j: np.ndarray, rest: np.ndarray, lam: float) -> tuple[float, float]:
    low, high = ppi_py.ppi_mean_ci(y, j, rest, alpha=0.05, **{_WEIGHT: lam})
    return float(np.ravel(low)[0]), float(np.ravel(high)[0])


@pytest.mark.parametrize("share", [0.05, 0.3, 0.9])
def test_difference_is_ppi_pythons_on_the_differences(share: float) -> None:
    ratios = []
    for seed in range(6):
        labelled = 60
        arrays, _ = _systems(labelled + round(labelled / share), labelled, seed)
        y, j, rest = _split(arrays)
        n = y.size
        got = corrected_difference(*arrays, resamples=2000, seed=seed)
        # The weight: ppi-python's power-tuned lambda with the covariance over n - 1.
        expected = min(1.0, max(0.0, _ppi_lambda(y, j, rest) * n / (n - 1)))
        assert got.weight == pytest.approx(expected, rel=1e-9, abs=1e-12)
        assert got.weight > 0  # a good judge counts
        found = ppi_py.ppi_mean_pointestimate(y, j, rest, **{_WEIGHT: got.weight})
        assert got.mean == pytest.approx(float(np.ravel(found)[0]), rel=1e-12, abs=1e-12)
        assert got.labelled == n and got.unlabelled == rest.size
        assert got.judge_mean == pytest.approx(float(np.r_[j, rest].mean()))
        # The interval: ppi-python's normal interval at that weight, widened.
        widen = math.sqrt(n / (n - 1)) * t.ppf(0.975, n - 1) / norm.ppf(0.975)
        low, high = _ppi_ci(y, j, rest, got.weight)
        assert got.ci is not None and got.width == pytest.approx(got.ci[1] - got.ci[0])
        ratio = got.width / ((high - low) * widen)
        assert 0.85 < ratio < 1.35, (share, seed, ratio)
        ratios.append(ratio)
        # Human-only: ppi-python at lambda 0 is the normal interval of mean(D); widened
        # it is the t interval of the paired differences.
        assert got.human_mean == pytest.approx(float(y.mean()), rel=1e-12)
        low0, high0 = _ppi_ci(y, j, rest, 0.0)
        spread = t.ppf(0.975, n - 1) * y.std(ddof=1) / math.sqrt(n)
        assert (high0 - low0) * widen == pytest.approx(2 * spread, rel=1e-9)
        assert got.human_ci is not None and got.human_width is not None
        assert 0.85 < got.human_width / (2 * spread) < 1.2, (share, seed)
    assert 0.95 < float(np.mean(ratios)) < 1.15, ratios


def test_coverage_and_width_by_seeded_simulation() -> None:
    """1,000 seeded comparisons of 240 questions, 40 labelled by humans, a good judge:
    the corrected 95 % interval covers the true mean difference at least 94 % of the
    time (measured: 95.3 %) and is narrower on average than the human-only one
    (measured: 0.63 of its width; the human-only interval covers 93.2 %)."""
    covered = covered_human = 0
    widths, human_widths = [], []
    replicates = 1000
    for seed in range(replicates):
        arrays, truth = _systems(240, 40, seed)
        got = corrected_difference(*arrays, resamples=300, seed=seed)
        assert got.ci is not None and got.human_ci is not None
        covered += got.ci[0] <= truth <= got.ci[1]
        covered_human += got.human_ci[0] <= truth <= got.human_ci[1]
        widths.append(got.width)
        human_widths.append(got.human_width)
    assert covered / replicates >= 0.94, covered / replicates
    assert covered_human / replicates >= 0.92, covered_human / replicates
    assert float(np.mean(widths)) < 0.8 * float(np.mean(human_widths))


def test_a_90_percent_interval_fails_the_95_percent_check() -> None:
    """The coverage check can fail: a 90 % interval covers about 90 % of the time."""
    covered = 0
    for seed in range(300):
        arrays, truth = _systems(240, 40, seed)
        got = corrected_difference(*arrays, confidence=0.90, resamples=300, seed=seed)
        assert got.ci is not None
        covered += got.ci[0] <= truth <= got.ci[1]
    assert covered / 300 < 0.94


def test_a_useless_judge_gives_lambda_near_0_and_the_human_only_interval() -> None:
    for seed in range(5):
        arrays, _ = _systems(400, 80, seed, judge="useless")
        got = corrected_difference(*arrays, seed=seed)
        assert got.weight is not None and got.weight < 0.1
        assert got.mean == pytest.approx(got.human_mean, abs=0.01)
        assert got.ci is not None and got.human_ci is not None
        assert got.width == pytest.approx(got.human_width, rel=0.15)


def test_a_judge_that_gets_differences_backwards_weighs_0_exactly() -> None:
    arrays, _ = _systems(300, 50, 3)
    judged_a, judged_b, human_a, human_b = arrays
    got = corrected_difference(judged_b, judged_a, human_a, human_b, seed=3)
    assert got.weight == 0.0
    assert got.mean == pytest.approx(got.human_mean, rel=1e-12)


def test_fewer_than_two_labelled_questions_give_no_estimate() -> None:
    arrays, _ = _systems(50, 1, 0)
    got = corrected_difference(*arrays)
    assert got.labelled == 1 and got.unlabelled == 49
    assert got.mean is None and got.ci is None and got.width is None and got.weight is None
    assert got.human_mean is not None and got.human_ci is None
    assert got.judge_mean is not None
    none = corrected_difference(arrays[0], arrays[1], np.full(50, np.nan), np.full(50, np.nan))
    assert none.labelled == 0 and none.human_mean is None and none.mean is None


def test_all_differences_equal_give_a_point_interval() -> None:
    """Both systems score the same everywhere under both labels: D = Dhat = 0."""
    values = np.linspace(0, 1, 60)
    human = np.where(np.arange(60) % 3 == 0, values, np.nan)
    got = corrected_difference(values, values, human, human)
    assert got.mean == 0.0 and got.weight == 0.0
    assert got.ci == (0.0, 0.0) and got.width == 0.0
    assert got.human_ci == (0.0, 0.0)


def test_the_difference_stays_within_the_difference_range() -> None:
    """A always 1, B always 0 under human labels: the difference is 1 and cannot exceed it."""
    questions = 40
    ones, zeros = np.ones(questions), np.zeros(questions)
    human_a = np.where(np.arange(questions) < 10, ones, np.nan)
    human_b = np.where(np.arange(questions) < 10, zeros, np.nan)
    got = corrected_difference(ones, zeros, human_a, human_b)
    assert got.mean == pytest.approx(1.0)
    assert got.ci is not None and got.ci[1] <= 1.0
    flipped = corrected_difference(zeros, ones, human_b, human_a)
    assert flipped.ci is not None and flipped.ci[0] >= -1.0


def test_misaligned_arrays_are_refused() -> None:
    with pytest.raises(ValueError, match="same questions"):
        corrected_difference(np.zeros(5), np.zeros(5), np.zeros(4), np.zeros(4))


def _heteroscedastic(seed: int) -> tuple[Arrays, np.ndarray]:
    """Half the questions both systems rank alike (Dhat = D = 0, nothing to learn); on the
    others the judge's difference errs with sd 0.3. Returns the arrays and the true D."""
    rng = np.random.default_rng(seed)
    questions = 400
    alike = np.arange(questions) % 2 == 0
    d = np.where(alike, 0.0, rng.normal(0.1, 0.3, questions))
    dhat = np.where(alike, 0.0, d + rng.normal(0, 0.3, questions))
    base = rng.uniform(0.3, 0.7, questions)
    human = np.full(questions, np.nan)
    picked = rng.choice(questions, 60, replace=False)
    human[picked] = 0.0
    human_a, human_b = human.copy(), human.copy()
    human_a[picked] = base[picked] + d[picked]
    human_b[picked] = base[picked]
    return (base + dhat, base, human_a, human_b), d


def test_labelling_priority_puts_the_judges_likely_errors_first() -> None:
    for seed in range(5):
        arrays, d = _heteroscedastic(seed)
        ranked = labelling_priority(*arrays)
        labelled = ~np.isnan(arrays[2])
        indices = [index for index, _ in ranked]
        assert sorted(indices) == list(np.flatnonzero(~labelled))  # the unlabelled, each once
        scores = [score for _, score in ranked]
        assert scores == sorted(scores, reverse=True)
        half = len(indices) // 2
        dhat = arrays[0] - arrays[1]
        error = (d - dhat) ** 2
        # The first half holds most of the judge's error (a random order: half of it),
        # and is mostly the questions the systems rank differently (random: half).
        assert error[indices[:half]].sum() > 0.85 * error[indices].sum()
        assert np.mean(np.arange(400)[indices[:half]] % 2 == 1) > 0.85


def test_without_labels_the_priority_is_the_judges_spread() -> None:
    """|Dhat - mean(Dhat)| with mean 0.025: 0.025, 0.475, 0.525, 0.075."""
    dhat = np.array([0.0, 0.5, -0.5, 0.1])
    ranked = labelling_priority(dhat, np.zeros(4), np.full(4, np.nan), np.full(4, np.nan))
    assert [index for index, _ in ranked] == [2, 1, 3, 0]
    assert [score for _, score in ranked] == pytest.approx([0.525, 0.475, 0.075, 0.025])


def test_the_python_api_names_them() -> None:
    arrays, _ = _systems(100, 30, 1)
    found: Any = rk.corrected_difference(*arrays, resamples=200)
    assert found == corrected_difference(*arrays, resamples=200)
    assert rk.labelling_priority(*arrays) == labelling_priority(*arrays)


CONFIG = """\
[eval]
k = [1, 3, 5]

[retrievers.short]
plugin = "bm25"
corpus = "{corpus}"
doc_id_separator = "#"
max_doc_words = 12

[retrievers.full]
plugin = "bm25"
corpus = "{corpus}"
doc_id_separator = "#"
"""


def test_compare_reports_each_pairs_judge_corrected_difference(cli: Any, tmp_path: Path) -> None:
    """Two stored runs, a lenient judge grading every unjudged document either returned in
    its top 5, and humans grading every second question (half of those documents relevant):
    ``compare --extra-labels`` gives the pair's PPI difference as the library computes it
    from the same records, and ``--label-next`` the library's ranking."""
    from retrievalkit.demo import DEMO_CORPUS
    from retrievalkit.formats.labels import paired_correction, read_label_files

    (tmp_path / "retrievalkit.toml").write_text(CONFIG.format(corpus=DEMO_CORPUS), "utf-8")
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    run_ids = []
    for name in ("full", "short"):
        done = cli("eval", "--set", "demo", "--retriever", name, "--store", store,
                   "--format", "json")  # fmt: skip
        assert done.returncode == 0, done.stderr
        run_ids.append(json.loads(done.stdout)["run_id"])
    records = [rk.open_store(store).get(run_id) for run_id in run_ids]
    assert all(record is not None for record in records)
    rows = ["query-id\tcorpus-id\tscore\tjudge"]
    sampled = set()
    for index, outcome in enumerate(records[0].outcomes):  # type: ignore[union-attr]
        other = records[1].outcomes[index]  # type: ignore[union-attr]
        assert other.question_id == outcome.question_id
        unjudged = dict.fromkeys(
            doc
            for doc in [*outcome.ranking[:5], *other.ranking[:5]]
            if doc not in outcome.judgments
        )
        for position, doc in enumerate(unjudged):
            rows.append(f"{outcome.question_id}\t{doc}\t1\tmodel")
            if index % 2 == 0:
                rows.append(f"{outcome.question_id}\t{doc}\t{position % 2}\thuman")
                sampled.add(outcome.question_id)
    labels = tmp_path / "labels.tsv"
    labels.write_text("\n".join(rows) + "\n", encoding="utf-8")
    args = ("compare", "--run", run_ids[0], "--run", run_ids[1], "--store", store,
            "--extra-labels", str(labels))  # fmt: skip
    done = cli(*args, "--format", "json", "--label-next", "4", "--resamples", "500")
    assert done.returncode == 0, done.stderr
    (pair,) = json.loads(done.stdout)["pairs"]
    expected = paired_correction(
        records[1].outcomes,  # type: ignore[union-attr]
        records[0].outcomes,  # type: ignore[union-attr]
        [1, 3, 5],
        read_label_files([str(labels)]),
        resamples=500,
    )
    assert expected is not None
    for metric in ("hit@1", "rr", "ndcg@5"):
        found, want = pair["ppi"][metric], expected.differences[metric]
        assert found["mean"] == pytest.approx(want.mean, abs=1e-12), metric
        assert found["ci"] == pytest.approx(list(want.ci), abs=1e-12), metric
        assert found["human_ci"] == pytest.approx(list(want.human_ci), abs=1e-12), metric
        assert found["weight"] == pytest.approx(want.weight, abs=1e-12)
        assert found["width"] == pytest.approx(want.ci[1] - want.ci[0], abs=1e-12)
        column = expected.split[0][metric] - expected.split[1][metric]
        defined = {
            qid
            for qid, value in zip(expected.questions, column, strict=True)
            if not np.isnan(value)
        }
        assert found["labelled"] == len(sampled & defined) and found["method"] == "ppi-bca"
        assert found["labelled"] + found["unlabelled"] == len(defined)
    # The candidate is the second run: the judge-only difference is its mean minus the first's.
    rr = pair["ppi"]["rr"]
    assert rr["judge_mean"] == pytest.approx(
        float(np.nanmean(expected.split[0]["rr"] - expected.split[1]["rr"]))
    )
    assert pair["label_next"]["metric"] == "rr"
    assert pair["label_next"]["questions"] == expected.label_next("rr", 4)
    assert not set(pair["label_next"]["questions"]) & sampled
    markdown = cli(*args, "--format", "markdown", "--resamples", "200").stdout
    assert "## Judge-corrected difference (PPI): short against full" in markdown
    assert "| metric | judge's labels | corrected |" in markdown
    table = cli(*args, "--resamples", "200", "--label-next", "3")
    assert "Judge-corrected difference (PPI)" in table.stdout, table.stderr
    assert "label next (for rr): " in table.stdout


def test_label_next_without_human_labels_is_refused(cli: Any, tmp_path: Path) -> None:
    common = ("compare", "--set", "demo", "--retriever", "bm25-demo", "--retriever",
              "bm25-demo", "--no-save", "--store", "memory:")  # fmt: skip
    done = cli(*common, "--label-next", "3")
    assert done.returncode == 2 and "--label-next" in done.stderr
    labels = tmp_path / "labels.tsv"
    labels.write_text("query-id\tcorpus-id\tscore\tjudge\nq1\tdoc-x\t1\tmodel\n", "utf-8")
    done = cli(*common, "--label-next", "3", "--extra-labels", str(labels))
    assert done.returncode == 2 and "has none" in done.stderr, done.stderr
    done = cli(*common, "--label-next", "-1")
    assert done.returncode == 2 and "--label-next" in done.stderr


def _weight(y: np.ndarray, j: np.ndarray, rest: np.ndarray) -> float:
    """ppi-python's power-tuned lambda with the covariance over n - 1, clipped to [0, 1]."""
    return min(1.0, max(0.0, _ppi_lambda(y, j, rest) * y.size / (y.size - 1)))


def _priority_scores(arrays: Arrays) -> dict[int, float]:
    """Active inference's score of each unlabelled question, computed apart: PPI++'s
    lambda from ppi-python (covariance over n - 1, clipped to [0, 1]), the squared
    centred residuals of the labelled questions, and statsmodels' Nadaraya-Watson (local
    constant, Gaussian kernel) regression of them on Dhat at Silverman's rule-of-thumb
    bandwidth 1.06 sd n^(-1/5)."""
    from statsmodels.nonparametric.kernel_regression import KernelReg

    y, j, rest = _split(arrays)
    weight = _weight(y, j, rest)
    residual = y - weight * j
    squares = (residual - residual.mean()) ** 2
    bandwidth = 1.06 * np.std(j, ddof=1) * len(j) ** -0.2
    fitted, _ = KernelReg(squares, j, var_type="c", reg_type="lc", bw=[bandwidth]).fit(rest)
    unlabelled = np.flatnonzero(np.isnan(arrays[2]))
    return dict(zip(unlabelled.tolist(), np.sqrt(fitted).tolist(), strict=True))


def test_the_priority_is_the_kernel_estimate_of_the_judges_error() -> None:
    arrays, _ = _heteroscedastic(0)
    expected = _priority_scores(arrays)
    ranked = labelling_priority(*arrays)
    assert len(ranked) == len(expected)
    for index, score in ranked:
        assert score == pytest.approx(expected[index], rel=1e-6, abs=1e-12), index
    assert len({round(score, 9) for _, score in ranked}) > 10  # not one pooled value


@pytest.mark.filterwarnings("error")
def test_a_judge_difference_the_labels_say_nothing_about_gets_the_pooled_error() -> None:
    """Where the kernel has no width (every labelled Dhat equal) or no weight (a Dhat far
    from every labelled one), the score is the pooled sqrt(mean of the squared centred
    residuals), with no warning."""
    human_a = np.array([0.9, 0.2, 0.6, np.nan, np.nan, np.nan])
    human_b = np.array([0.1, 0.5, 0.6, np.nan, np.nan, np.nan])
    flat = labelling_priority(np.full(6, 0.4), np.full(6, 0.1), human_a, human_b)
    y = human_a[:3] - human_b[:3]
    pooled = float(np.sqrt(((y - y.mean()) ** 2).mean()))  # lambda: no covariance, 0
    assert [index for index, _ in flat] == [3, 4, 5]
    assert [score for _, score in flat] == pytest.approx([pooled] * 3)
    # Labelled Dhat within 0.002 of 0.3 (bandwidth about 0.001): 0.95 is 600 bandwidths
    # away, where every Gaussian weight underflows to 0.
    judged_a = np.array([0.301, 0.299, 0.300, 0.95, 0.3005, 0.2])
    near = labelling_priority(judged_a, np.zeros(6), human_a, human_b)
    scores = dict(near)
    residual = y - _weight(y, judged_a[:3], judged_a[3:]) * judged_a[:3]
    assert scores[3] == pytest.approx(float(np.sqrt(((residual - residual.mean()) ** 2).mean())))
    assert all(math.isfinite(score) for score in scores.values())


def test_two_labelled_questions_give_an_estimate_and_one_pooled_priority() -> None:
    """Two labelled questions are the fewest with an estimate: ppi-python's point
    estimate at the weight. Their two squared centred residuals are equal, so every
    unlabelled question gets the same score, |r1 - r2| / 2, and the order is the
    judge's spread |Dhat - mean(Dhat)|, largest first."""
    judged_a = np.array([0.9, 0.3, 0.8, 0.1, 0.55, 0.4])
    judged_b = np.array([0.2, 0.4, 0.3, 0.3, 0.5, 0.45])
    human_a = np.array([0.8, 0.2, np.nan, np.nan, np.nan, np.nan])
    human_b = np.array([0.3, 0.5, np.nan, np.nan, np.nan, np.nan])
    arrays = (judged_a, judged_b, human_a, human_b)
    got = corrected_difference(*arrays, resamples=200)
    y, j, rest = _split(arrays)
    assert got.labelled == 2 and got.weight == pytest.approx(_weight(y, j, rest), abs=1e-12)
    found = ppi_py.ppi_mean_pointestimate(y, j, rest, **{_WEIGHT: got.weight})
    assert got.mean == pytest.approx(float(np.ravel(found)[0]), rel=1e-12)
    residual = y - got.weight * j
    ranked = labelling_priority(*arrays)
    dhat = judged_a - judged_b
    spread = np.abs(dhat - dhat.mean())
    assert [index for index, _ in ranked] == sorted(range(2, 6), key=lambda i: -spread[i])
    assert [score for _, score in ranked] == pytest.approx([abs(residual[0] - residual[1]) / 2] * 4)


@pytest.mark.filterwarnings("error")
def test_no_defined_judge_value_gives_no_judge_mean_and_no_question_to_label() -> None:
    nothing = np.full(5, np.nan)
    human = np.array([0.5, 0.2, np.nan, np.nan, np.nan])
    got = corrected_difference(nothing, nothing, human, human)
    assert got.judge_mean is None and got.mean is None and got.labelled == 0
    assert labelling_priority(nothing, nothing, human, human) == []


def test_zero_one_values_as_booleans_or_integers_are_the_same_comparison() -> None:
    rng = np.random.default_rng(4)
    judged_a, judged_b = rng.random(60) < 0.6, rng.random(60) < 0.4
    human_a = np.where(np.arange(60) < 20, judged_a ^ (rng.random(60) < 0.1), np.nan)
    human_b = np.where(np.arange(60) < 20, judged_b, np.nan)
    floats = corrected_difference(judged_a * 1.0, judged_b * 1.0, human_a, human_b, resamples=200)
    for a, b in ((judged_a, judged_b), (judged_a.astype(int), judged_b.astype(int))):
        same = corrected_difference(a, b, human_a, human_b, resamples=200)
        assert same == floats
        assert labelling_priority(a, b, human_a, human_b) == labelling_priority(
            judged_a * 1.0, judged_b * 1.0, human_a, human_b
        )


def test_the_difference_range_follows_the_metrics_range() -> None:
    """A metric in [2, 3]: the difference A - B lies in [-1, 1]. Humans and the judge
    agree: A 3 and B 2 on every question but one where both are 2, so the differences
    are nine 1s and a 0 (mean 0.9), and the t interval's high end, 0.9 + 2.26 x 0.316 /
    sqrt(10) = 1.13, is cut at 1, the highest difference there is."""
    questions = 40
    a = np.where(np.arange(questions) % 10 == 9, 2.0, 3.0)
    b = np.full(questions, 2.0)
    human_a = np.where(np.arange(questions) < 10, a, np.nan)
    human_b = np.where(np.arange(questions) < 10, b, np.nan)
    got = corrected_difference(a, b, human_a, human_b, value_range=(2.0, 3.0))
    assert got.mean == pytest.approx(0.9)
    assert got.human_ci is not None and got.human_ci[1] == 1.0
    assert got.ci is not None and got.ci[1] <= 1.0
    flipped = corrected_difference(b, a, human_b, human_a, value_range=(2.0, 3.0))
    assert flipped.human_ci is not None and flipped.human_ci[0] == -1.0


def test_the_human_only_interval_is_the_human_samples_alone() -> None:
    """With no judge (weight 0) the other questions' judge values take no part: the
    human-only interval is the same with 0 or 300 of them."""
    arrays, _ = _systems(340, 40, 2)
    judged_a, judged_b, human_a, human_b = arrays
    labelled = ~np.isnan(human_a)
    alone = corrected_difference(
        judged_a[labelled], judged_b[labelled], human_a[labelled], human_b[labelled]
    )
    beside = corrected_difference(*arrays)
    assert alone.unlabelled == 0 and beside.unlabelled == 300
    assert beside.human_mean == alone.human_mean
    assert beside.human_ci == alone.human_ci and beside.human_width == alone.human_width
