"""Team-draft interleaving: the ``interleave`` retriever and ``retrievalkit interleave credit``.

The properties of team draft (Radlinski, Kurup & Joachims 2008) are checked on random
rankings; the sign test against ``scipy.stats.binomtest``; the statistical claims (a
better ranker is found, equally good ones are not told apart more often than alpha,
the impressions the power calculation asks for are enough) by seeded simulations of
users clicking in a cascade.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

import retrievalkit as rk
from retrievalkit.demo import DEMO_CORPUS
from retrievalkit.errors import InputError
from retrievalkit.formats.clicks import read_clicks
from retrievalkit.model.interleaving import SHARED, Impression
from retrievalkit.pipeline.gating.interleaving import credit
from retrievalkit.plugins.resolution import resolve_retriever
from retrievalkit.retrievers.interleave import coin_flips, team_draft
from retrievalkit.stats.sign_test import sign_test_p_value

TEAMS = ("a", "b")
rankings = st.lists(st.integers(0, 30).map(lambda n: f"d{n}"), max_size=25)


def _draft(first: list[str], second: list[str], limit: int, query: str = "q", seed: int = 0):
    return team_draft(first, second, limit, teams=TEAMS, coins=coin_flips(query, seed))


@settings(max_examples=300, deadline=None)
@given(rankings, rankings, st.integers(1, 30), st.text(max_size=8), st.integers(0, 5))
def test_team_draft_properties(
    first: list[str], second: list[str], limit: int, query: str, seed: int
) -> None:
    shown = _draft(first, second, limit, query, seed)
    ids = [doc.id for doc in shown]
    assert len(ids) == len(set(ids)) <= limit  # no document twice
    assert shown == _draft(first, second, limit, query, seed)  # deterministic per seed
    picks = {"a": 0, "b": 0}
    for document in shown:  # every prefix balanced within one
        if document.team != SHARED:
            picks[document.team] += 1
        assert abs(picks["a"] - picks["b"]) <= 1
    for team, ranking in zip(TEAMS, (first, second), strict=True):
        # each team's documents come in its own order, and each is the best it had left
        mine = [doc.id for doc in shown if doc.team == team]
        order = list(dict.fromkeys(ranking))
        assert mine == sorted(mine, key=order.index)
        for position, document in enumerate(shown):
            if document.team == team:
                before = set(ids[:position])
                assert document.id == next(doc for doc in order if doc not in before)
    # the shared prefix is exactly where both rankings agree from the top
    shared = [doc.id for doc in shown if doc.team == SHARED]
    assert shared == ids[: len(shared)]
    assert all(x == y for x, y in zip(shared, list(dict.fromkeys(second)), strict=False))


def test_the_draft_stops_when_a_team_runs_out_and_the_coin_depends_on_seed_and_query() -> None:
    # after "y" is shown, team b has nothing left to pick, so the list ends there
    seen = set()
    for query in ("one", "two", "three", "four", "five", "six"):
        shown = [(doc.id, doc.team) for doc in _draft(["x", "y", "z"], ["y"], 10, query)]
        assert shown in ([("x", "a"), ("y", "b")], [("y", "b")])
        seen.add(len(shown))
    assert seen == {1, 2}
    firsts = {
        _draft([f"a{i}" for i in range(5)], [f"b{i}" for i in range(5)], 4, query, seed)[0].team
        for query in ("one", "two", "three", "four", "five", "six")
        for seed in range(4)
    }
    assert firsts == {"a", "b"}  # the coin is not fixed to one side


def test_a_retriever_interleaved_with_itself_ties(tmp_path: Path) -> None:
    config = _config(tmp_path, second_options='corpus = "' + str(DEMO_CORPUS) + '"\n')
    interleaved = resolve_retriever("online", rk.load_config(config)).retriever
    log = tmp_path / "impressions.jsonl"
    for number, question in enumerate(rk.load_set("demo").questions):
        hits = interleaved.retrieve_hits(question.question, 5, impression=f"i{number}")
        assert hits and all(hit["metadata"]["team"] == SHARED for hit in hits)
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    for line in lines:  # every user clicks the first two documents
        line["clicked"] = [shown["id"] for shown in line["shown"][:2]]
    _write(log, lines)
    result = rk.interleave_credit(log)
    assert result.with_clicks == len(lines) and result.ties == len(lines)
    assert result.wins == result.losses == 0 and result.p_value is None


@pytest.mark.parametrize(("wins", "losses"), [(0, 1), (3, 9), (10, 10), (17, 4), (0, 25), (60, 41)])
def test_the_sign_test_is_scipys_binomial_test(wins: int, losses: int) -> None:
    expected = binomtest(wins, wins + losses, 0.5).pvalue
    assert sign_test_p_value(wins, losses) == pytest.approx(expected, rel=1e-12, abs=1e-300)
    assert sign_test_p_value(0, 0) is None


# --- seeded simulations --------------------------------------------------------------------


def _ranking(relevant: np.ndarray, quality: float, rng: np.random.Generator) -> list[str]:
    """A ranking of 20 candidates by relevance x quality plus unit normal noise."""
    scores = relevant * quality + rng.normal(size=relevant.size)
    return [f"d{i}" for i in np.argsort(-scores, kind="stable")]


def _clicks(shown: list[str], relevant: set[str], rng: np.random.Generator) -> list[str]:
    """A cascade user: reads down, clicks a relevant document with chance 0.8 and another
    with 0.1, and stops after a click with chance 0.5."""
    clicked = []
    for doc in shown:
        if rng.random() < (0.8 if doc in relevant else 0.1):
            clicked.append(doc)
            if rng.random() < 0.5:
                break
    return clicked


def _experiment(qualities: tuple[float, float], impressions: int, seed: int) -> Impression:
    rng = np.random.default_rng(seed)
    logged = []
    for number in range(impressions):
        relevant = (rng.random(20) < 0.2).astype(float)
        first, second = (_ranking(relevant, quality, rng) for quality in qualities)
        query = f"{seed}-{number}"
        shown = _draft(first, second, 10, query, seed)
        truth = {f"d{i}" for i in np.flatnonzero(relevant)}
        clicked = _clicks([doc.id for doc in shown], truth, rng)
        logged.append(Impression(query, query, TEAMS, tuple(shown), tuple(clicked)))
    return credit(logged, log="simulated")


@pytest.mark.timeout(600)
def test_a_better_ranker_wins_the_sign_test() -> None:
    """Quality 2.0 against 1.0 (the relevant documents' score lift over unit noise), 150
    impressions a test: the better (second) team must win at alpha 0.05 in at least 80 %
    of 200 seeded experiments (in 97.5 % when last measured)."""
    found = [
        result.significant and result.losses > result.wins
        for result in (_experiment((1.0, 2.0), 150, seed) for seed in range(200))
    ]
    assert np.mean(found) >= 0.8, np.mean(found)


@pytest.mark.timeout(600)
def test_equally_good_rankers_are_rarely_told_apart() -> None:
    """Two rankers of the same quality (independent noise), 150 impressions: rejected at
    alpha 0.05 at most 6.5 % of 600 seeded experiments (5 % plus 1.7 standard errors;
    the exact sign test is conservative, so the rate is usually below 5 %)."""
    rejected = [_experiment((1.0, 1.0), 150, 1000 + seed).significant for seed in range(600)]
    assert np.mean(rejected) <= 0.065, np.mean(rejected)


def test_the_impressions_asked_for_are_enough() -> None:
    """At the impressions with clicks the power calculation asks for, a preference of 0.15
    with 60 % untied impressions is found in about 80 % of 3,000 seeded logs (the exact
    power saw-tooths with n, so at least 77 %; and at half as many, clearly less)."""
    from retrievalkit.pipeline.gating.interleaving import impressions_needed

    needed = impressions_needed(0.15, discordance=0.6, click_rate=0.5, impressions=100, alpha=0.05)
    assert needed.with_clicks is not None and needed.impressions == 2 * needed.with_clicks
    assert needed.more == needed.impressions - 100
    rng = np.random.default_rng(7)

    def found(n: int) -> float:
        outcomes = rng.multinomial(n, [(0.6 + 0.15) / 2, 0.4, (0.6 - 0.15) / 2], size=3000)
        return float(
            np.mean([sign_test_p_value(int(won), int(lost)) < 0.05 for won, _, lost in outcomes])
        )

    assert found(needed.with_clicks) >= 0.77
    assert found(needed.with_clicks // 2) < 0.7


# --- the log, the command line --------------------------------------------------------------


def _config(tmp_path: Path, second_options: str = "") -> Path:
    corpus = json.dumps(str(DEMO_CORPUS))
    path = tmp_path / "retrievalkit.toml"
    path.write_text(
        f"""
[retrievers.stemmed]
plugin = "bm25"
corpus = {corpus}

[retrievers.unstemmed]
plugin = "bm25"
{second_options or f'corpus = {corpus}{chr(10)}stemmer = ""{chr(10)}stopwords = ""'}

[retrievers.online]
plugin = "interleave"
retrievers = ["stemmed", "unstemmed"]
seed = 3
log = {json.dumps(str(tmp_path / "impressions.jsonl"))}
""",
        encoding="utf-8",
    )
    return path


def _write(path: Path, lines: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_credit_end_to_end_on_the_command_line(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    config = _config(tmp_path)
    interleaved = resolve_retriever("online", rk.load_config(config)).retriever
    golden = rk.load_set("demo")
    users = random.Random(11)
    for number, question in enumerate(golden.questions):
        hits = interleaved.retrieve_hits(question.question, 6, impression=f"imp-{number}")
        assert [hit["rank"] for hit in hits] == list(range(1, len(hits) + 1))
        assert {hit["metadata"]["team"] for hit in hits} <= {"stemmed", "unstemmed", SHARED}
        assert interleaved.retrieve(question.question, 6) == [hit["id"] for hit in hits]
    lines = [
        json.loads(text)
        for text in (tmp_path / "impressions.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert len(lines) == len(golden.questions) and all(line["clicked"] == [] for line in lines)
    expected = {question.question: set(question.expected) for question in golden.questions}
    tally = {"win": 0, "tie": 0, "loss": 0}
    for line in lines:  # users click the expected documents, and now and then another
        line["clicked"] = [
            shown["id"]
            for shown in line["shown"]
            if shown["id"] in expected[line["query"]] or users.random() < 0.15
        ]
        teams = [shown["team"] for shown in line["shown"] if shown["id"] in line["clicked"]]
        if line["clicked"]:
            first, second = teams.count("stemmed"), teams.count("unstemmed")
            tally["win" if first > second else "loss" if first < second else "tie"] += 1
    _write(tmp_path / "clicks.jsonl", lines)

    shown = cli("interleave", "credit", "--log", "clicks.jsonl", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["teams"] == ["stemmed", "unstemmed"]
    assert (document["wins"], document["ties"], document["losses"]) == (
        tally["win"],
        tally["tie"],
        tally["loss"],
    )
    assert document["impressions"] == len(lines)
    with_clicks = sum(tally.values())
    assert document["with_clicks"] == with_clicks
    assert document["preference"]["value"] == pytest.approx(
        (tally["win"] - tally["loss"]) / with_clicks
    )
    low, high = document["preference"]["ci"]
    assert low <= document["preference"]["value"] <= high
    decided = tally["win"] + tally["loss"]
    if decided:
        assert document["sign_test"]["p_value"] == pytest.approx(
            binomtest(tally["win"], decided, 0.5).pvalue
        )
    table = cli("interleave", "credit", "--log", "clicks.jsonl", "--effect", "0.2")
    assert table.returncode == 0, table.stderr
    assert "stemmed wins / ties / losses" in table.stdout
    assert f"{tally['win']} / {tally['tie']} / {tally['loss']}" in table.stdout
    assert "impressions for 0.200 at 80% power" in table.stdout
    markdown = cli("interleave", "credit", "--log", "clicks.jsonl", "--format", "markdown")
    assert markdown.returncode == 0 and "| sign test p |" in markdown.stdout


GOOD = {
    "impression": "i1",
    "query": "q",
    "teams": ["a", "b"],
    "shown": [{"id": "d1", "team": "a"}, {"id": "d2", "team": "b"}],
    "clicked": ["d2"],
}


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        ("{not json", None, "is not JSON"),
        (json.dumps([1]), None, "must be a JSON object"),
        (json.dumps({**GOOD, "clicked": ["d9"]}), "clicked[0]", "not among the shown"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "teams"}), "teams", "is missing"),
        (json.dumps({**GOOD, "teams": ["a"]}), "teams", "two retrievers"),
        (json.dumps({**GOOD, "shown": [{"id": "d1", "team": "c"}]}), "shown[0].team", "not one"),
        (json.dumps({**GOOD, "shown": [{"id": "d1", "team": "a"}] * 2}), "shown[1].id", "twice"),
        (json.dumps({**GOOD, "clicks": []}), "clicks", "unknown field"),
        (json.dumps({**GOOD, "query": ""}), "query", "non-empty string"),
        (
            json.dumps({**GOOD, "impression": "i2", "teams": ["b", "a"]}),
            "teams",
            "one log holds one experiment",
        ),
        (json.dumps(GOOD), "impression", "already on line 1"),
    ],
)
def test_a_malformed_line_is_named(
    tmp_path: Path, line: str, field: str | None, words: str
) -> None:
    log = tmp_path / "clicks.jsonl"
    log.write_text(json.dumps(GOOD) + "\n\n" + line + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        list(read_clicks(log))
    error = caught.value
    assert (error.source, error.line, error.field) == (str(log), 3, field)
    assert words in error.detail


def test_a_malformed_log_exits_2_naming_file_and_line(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "clicks.jsonl").write_text(
        json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "impression": "i2", "clicked": ["d7"]}),
        encoding="utf-8",
    )
    shown = cli("interleave", "credit", "--log", "clicks.jsonl")
    assert shown.returncode == 2
    assert "clicks.jsonl, line 2, field 'clicked[0]'" in shown.stderr
    missing = cli("interleave", "credit", "--log", "nowhere.jsonl")
    assert missing.returncode == 2 and "nowhere.jsonl" in missing.stderr
    effect = cli("interleave", "credit", "--log", "clicks.jsonl", "--effect", "2")
    assert effect.returncode == 2 and "--effect" in effect.stderr


def test_the_retriever_refuses_bad_options(tmp_path: Path) -> None:
    from retrievalkit.retrievers.interleave import create_interleave

    for retrievers in (None, ["bm25-demo"], ["bm25-demo", "bm25-demo"], "bm25-demo"):
        with pytest.raises(InputError) as caught:
            create_interleave(retrievers)
        assert caught.value.field == "retrievers"
    with pytest.raises(InputError) as caught:
        create_interleave(["bm25-demo", "run"], seed="7")  # type: ignore[arg-type]
    assert caught.value.field == "seed"


# --- a worked example of the credit -------------------------------------------------------


def _shown(query: str, clicked: tuple[str, ...], teams: tuple[str, str] = TEAMS) -> Impression:
    from retrievalkit.model.interleaving import ShownDocument

    shown = (
        ShownDocument("d1", teams[0]),
        ShownDocument("d2", teams[1]),
        ShownDocument("d3", SHARED),
    )
    return Impression(f"i-{query}-{'-'.join(clicked)}", query, teams, shown, clicked)


#: d1 is team a's, d2 team b's, d3 shared. By hand: q1 a win (d1) and a loss (d2, d3: the
#: shared click credits neither); q2 a tie (one click each) and an impression without
#: clicks; q3 a win, and a tie (only the shared document clicked); q4 a win (d1 twice
#: against d2 once). Outcomes +1 -1 0 +1 0 +1: 3 wins, 2 ties, 1 loss over 6 impressions
#: with clicks, of 7 impressions of 4 queries.
WORKED = [
    _shown("q1", ("d1",)),
    _shown("q1", ("d2", "d3")),
    _shown("q2", ("d1", "d2")),
    _shown("q2", ()),
    _shown("q3", ("d1",)),
    _shown("q3", ("d3",)),
    _shown("q4", ("d1", "d2", "d1")),
]


def test_the_credit_of_a_worked_example() -> None:
    """The counts above; the preference (3 - 1) / 6 = 1/3; the win share 3 / 4 with
    scipy's exact (Clopper-Pearson) interval; the sign test scipy's binomial test of 3 of
    4 (p = 0.625, not significant); the preference's interval the paired interval of the
    six outcomes, holding 0 since p >= alpha; and the impressions a preference of 1/3
    needs at the log's untied share (4 / 6) and click rate (6 / 7)."""
    from retrievalkit.pipeline.gating.interleaving import impressions_needed, outcome
    from retrievalkit.stats.paired import paired_interval

    assert [outcome(impression) for impression in WORKED] == [1, -1, 0, None, 1, 0, 1]
    found = credit(WORKED, log="worked.jsonl")
    assert found.log == "worked.jsonl" and found.teams == TEAMS
    assert (found.impressions, found.with_clicks, found.queries) == (7, 6, 4)
    assert (found.wins, found.ties, found.losses) == (3, 2, 1)
    assert found.preference.value == pytest.approx(1 / 3)
    p_value = binomtest(3, 4, 0.5).pvalue
    assert p_value == pytest.approx(0.625)
    assert found.p_value == pytest.approx(p_value, rel=1e-12)
    assert found.significant is False and found.confidence == 0.95
    exact = binomtest(3, 4).proportion_ci(confidence_level=0.95, method="exact")
    assert found.win_share.value == 0.75 and found.win_share.method == "clopper-pearson"
    assert found.win_share.ci == pytest.approx((exact.low, exact.high), rel=1e-9)
    low, high, method = paired_interval(
        np.array([1.0, -1.0, 0.0, 1.0, 0.0, 1.0]), p_value, 4, confidence=0.95
    )
    assert found.preference.ci == (low, high) and found.preference.method == method
    assert low is not None and high is not None and low < 0.0 < high
    assert found.needed == impressions_needed(
        1 / 3, discordance=4 / 6, click_rate=6 / 7, impressions=7, alpha=0.05
    )
    assert [(q.query, q.wins, q.ties, q.losses) for q in found.by_query] == [
        ("q1", 1, 0, 1),
        ("q2", 0, 1, 0),
        ("q3", 1, 1, 0),
        ("q4", 1, 0, 0),
    ]


def test_the_credit_at_another_confidence_and_effect() -> None:
    """At 90 %: scipy's 90 % exact interval of the win share, alpha 0.1 for the
    impressions needed, and the effect asked for instead of the one seen."""
    from retrievalkit.pipeline.gating.interleaving import impressions_needed

    found = credit(WORKED, log="worked", confidence=0.9, effect=0.2, power=0.9)
    exact = binomtest(3, 4).proportion_ci(confidence_level=0.9, method="exact")
    assert found.win_share.ci == pytest.approx((exact.low, exact.high), rel=1e-9)
    assert found.confidence == 0.9
    assert found.needed == impressions_needed(
        0.2, discordance=4 / 6, click_rate=6 / 7, impressions=7, alpha=0.1, power=0.9
    )
    assert found.needed is not None and found.needed.power == 0.9


def test_a_clear_preference_is_significant_and_its_interval_excludes_zero() -> None:
    """Twelve wins of the second team, no other outcome: the sign test's p is
    2 / 2^12 (scipy's), below 0.05, and the preference -1 with an interval below 0; the
    impressions needed for a preference of 1 are few, and the log already has them."""
    log = [_shown(f"q{number}", ("d2",)) for number in range(12)]
    found = credit(log, log="clear")
    assert (found.wins, found.ties, found.losses) == (0, 0, 12)
    assert found.p_value == pytest.approx(binomtest(0, 12, 0.5).pvalue, rel=1e-12)
    assert found.p_value == pytest.approx(2 / 2**12) and found.significant is True
    assert found.preference.value == -1.0
    assert found.preference.ci is not None and found.preference.ci[1] < 0.0
    assert found.win_share.value == 0.0 and found.win_share.ci is not None
    assert found.win_share.ci[0] == 0.0
    assert found.needed is not None and found.needed.effect == 1.0
    assert found.needed.with_clicks is not None and found.needed.with_clicks <= 12
    assert found.needed.more == 0


def test_a_log_of_ties_or_of_no_clicks_has_no_test() -> None:
    """Only ties: a preference of 0 (an interval from the constant rule), no win share,
    no p-value, no verdict and, with no effect seen or asked for, no impressions needed.
    No clicks at all: no preference either; an effect asked for gets its impressions with
    clicks (every impression untied), but no impressions, without a click rate."""
    tied = credit([_shown("q1", ("d1", "d2")), _shown("q2", ("d3",))], log="ties")
    assert (tied.with_clicks, tied.ties, tied.p_value, tied.significant) == (2, 2, None, None)
    assert tied.preference.value == 0.0 and tied.preference.ci is not None
    assert tied.preference.ci[0] <= 0.0 <= tied.preference.ci[1]
    assert tied.win_share.value is None and tied.win_share.ci is None and tied.needed is None
    silent = credit([_shown("q1", ()), _shown("q1", ())], log="silent", effect=0.3)
    assert (silent.impressions, silent.with_clicks, silent.queries) == (2, 0, 1)
    assert silent.preference.value is None and silent.preference.ci is None
    assert silent.needed is not None and silent.needed.discordance == 1.0
    assert silent.needed.with_clicks is not None and silent.needed.impressions is None
    assert silent.needed.more is None
    empty = credit([], log="empty")
    assert empty.teams == ("", "") and empty.impressions == 0 and empty.needed is None


def test_the_impressions_needed_at_a_click_rate() -> None:
    """Impressions = ceil(with clicks / click rate), the rest still to collect (never
    below 0), and the untied share assumed the larger of the log's and the effect, at
    most 1. The same preference needs more impressions with clicks when more of them are
    untied (it is then a win share nearer one half among them)."""
    from retrievalkit.pipeline.gating.interleaving import impressions_needed

    needed = impressions_needed(0.2, discordance=0.5, click_rate=0.3, impressions=40, alpha=0.05)
    assert needed.with_clicks is not None
    assert needed.impressions == math.ceil(needed.with_clicks / 0.3)
    assert needed.more == needed.impressions - 40 and needed.discordance == 0.5
    assert needed.effect == 0.2 and needed.power == 0.8
    plenty = impressions_needed(0.2, discordance=0.5, click_rate=0.3, impressions=10**6, alpha=0.05)
    assert plenty.more == 0 and plenty.impressions == needed.impressions
    # at a click rate of 0.5 exactly twice the impressions with clicks, not one more
    exact = impressions_needed(0.5, discordance=0.5, click_rate=0.5, impressions=0, alpha=0.05)
    assert exact.with_clicks is not None
    assert exact.impressions == exact.with_clicks * 2
    rare = impressions_needed(0.2, discordance=0.1, click_rate=0.3, impressions=40, alpha=0.05)
    assert rare.discordance == 0.2  # at least the effect
    assert (
        impressions_needed(
            0.9, discordance=1.5, click_rate=1.0, impressions=0, alpha=0.05
        ).discordance
        == 1.0
    )
    many = impressions_needed(0.2, discordance=0.9, click_rate=0.3, impressions=40, alpha=0.05)
    assert many.with_clicks is not None and many.with_clicks > needed.with_clicks


def test_the_credit_edges() -> None:
    """Wins as many as losses still have a win share (1/2, scipy's exact interval); a
    query's outcomes add up; a p-value equal to alpha is not significant (the sign test
    of 12 to 0 is 2 / 2^12 exactly); the preference's interval is at the confidence asked
    for; an empty log asked for an effect has impressions with clicks but no click rate."""
    from retrievalkit.pipeline.gating.interleaving import impressions_needed
    from retrievalkit.stats.paired import paired_interval

    even = credit([_shown("q", ("d1",)), _shown("q", ("d2",))] * 2, log="even")
    assert (even.wins, even.losses, even.win_share.value) == (2, 2, 0.5)
    exact = binomtest(2, 4).proportion_ci(confidence_level=0.95, method="exact")
    assert even.win_share.ci == pytest.approx((exact.low, exact.high), rel=1e-9)
    assert [(q.query, q.wins, q.ties, q.losses) for q in even.by_query] == [("q", 2, 0, 2)]
    clear = [_shown(f"q{number % 3}", ("d2",)) for number in range(12)]
    assert [q.losses for q in credit(clear, log="clear").by_query] == [4, 4, 4]
    edge = credit(clear, log="clear", confidence=1.0 - 2 / 2**12)
    assert edge.p_value == 2 / 2**12 and edge.significant is False
    wide = credit(WORKED, log="worked", confidence=0.8)
    values = np.array([1.0, -1.0, 0.0, 1.0, 0.0, 1.0])
    low, high, _ = paired_interval(values, 0.625, 4, confidence=0.8)
    narrow = credit(WORKED, log="worked").preference.ci
    assert wide.preference.ci == pytest.approx((low, high))
    assert narrow is not None and wide.preference.ci is not None
    assert narrow[0] < wide.preference.ci[0]
    empty = credit([], log="empty", effect=0.3)
    assert empty.needed == impressions_needed(
        0.3, discordance=1.0, click_rate=None, impressions=0, alpha=0.05
    )
    assert empty.needed is not None and empty.needed.impressions is None


def test_more_power_needs_more_impressions() -> None:
    """At 90 % power the sign test needs more impressions with clicks than at the
    default 80 %, and what it asks for reaches 90 % in a seeded simulation."""
    from retrievalkit.pipeline.gating.interleaving import impressions_needed

    default = impressions_needed(0.15, discordance=0.6, click_rate=0.5, impressions=0, alpha=0.05)
    more = impressions_needed(
        0.15, discordance=0.6, click_rate=0.5, impressions=0, alpha=0.05, power=0.9
    )
    assert default.with_clicks is not None and more.with_clicks is not None
    assert more.with_clicks > default.with_clicks and more.power == 0.9
    rng = np.random.default_rng(11)
    outcomes = rng.multinomial(more.with_clicks, [0.375, 0.4, 0.225], size=3000)
    found = np.mean([sign_test_p_value(int(w), int(lo)) < 0.05 for w, _, lo in outcomes])
    assert found >= 0.87
