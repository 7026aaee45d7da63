"""No number, interval or name is ever split across lines, at any width, on a terminal or a pipe.

Every table the CLI prints (eval's questions, metrics, stages, breakdowns and extra labels;
compare's systems, differences, changed questions and extra labels; history; power; sweep)
is rendered by the real command on the demo set at each width (``COLUMNS`` unset, 40, 60,
80, 100, 200), with stdout a pipe and with stdout a pseudo-terminal of that size. Every
value the command's JSON output holds must then appear whole on one line of the table
output, or its column be named in the line that says which columns were left out; and
with a width to fit, no line is wider than it. The eval tables are also drawn through
rich's ``Console(force_terminal=True, width=W)`` at seeded random widths, and `fit` itself
is held to the same rules on seeded random tables (numbers, intervals, dotted names;
random columns that may go, boxes and widths).
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import random
import re
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from child_env import child_environment
from rich.cells import cell_len
from rich.console import Console

import retrievalkit as rk
from retrievalkit.model.values import QuestionOutcome
from retrievalkit.render.summary import EvalReport
from retrievalkit.render.table import eval_renderable

DEMO_CORPUS = Path(rk.__file__).resolve().parent / "demo" / "corpus.jsonl"
WIDTHS: tuple[int | None, ...] = (None, 40, 60, 80, 100, 200)
MARK = "=== command "
STORE = "sqlite:///runs.sqlite3"
#: Labels for --extra-labels: a few question-document grades (query-id, corpus-id, score).
LABELS = "q01\tdoc-faq\t1\nq02\tdoc-faq\t0\nq05\tdoc-makerspace\t2\nq07\tdoc-faq\t1\n"
CONFIG = f"""\
[retrievers.engine-a-first]
plugin = "bm25"
corpus = "{DEMO_CORPUS}"
doc_id_separator = "#"
k1 = 1.5

[retrievers.engine-b-second]
plugin = "bm25"
corpus = "{DEMO_CORPUS}"
doc_id_separator = "#"
k1 = 0.5

[retrievers.truncated]
plugin = "bm25"
corpus = "{DEMO_CORPUS}"
doc_id_separator = "#"
max_doc_words = 15

[retrievers.engine-a-fused]
plugin = "fusion"
retrievers = ["engine-a-first", "truncated"]

[retrievers.engine-a-reranked]
plugin = "rerank"
first_stage = "engine-a-fused"
reranker = "tfidf-cosine"
reranker_options = {{ corpus = "{DEMO_CORPUS}", doc_id_separator = "#" }}
candidates = 30

[sweeps.k1grid]
retriever = "engine-a-first"
grid = {{ k1 = [0.6, 1.2] }}
"""

DRIVER = f"""\
import json, sys
from retrievalkit.cli.main import main
for argv in json.loads(sys.argv[1]):
    sys.stdout.write({MARK!r} + argv[0] + "\\n")
    sys.stdout.flush()
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    sys.stdout.flush()
    if code not in (0, None):
        sys.stderr.write(f"exit {{code}}: {{argv}}\\n")
        raise SystemExit(3)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in child_environment().items() if key != "COLUMNS"}
    env.pop("FORCE_COLOR", None)
    env.update(NO_COLOR="1", **extra)
    return env


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("fitting")
    (folder / "retrievalkit.toml").write_text(CONFIG, encoding="utf-8")
    (folder / "labels.tsv").write_text(LABELS, encoding="utf-8")
    runs = {}
    for retriever in ("engine-a-first", "engine-a-first", "engine-b-second", "engine-a-reranked"):
        done = subprocess.run(
            [sys.executable, "-m", "retrievalkit", "eval", "--set", "demo", "--retriever",
             retriever, "--store", STORE, "--format", "json"],
            cwd=folder, env=_env(), capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs[retriever] = json.loads(done.stdout)["run_id"]
    commands = _commands(runs)
    # The JSON of each command (a sweep's is the sweep.json of the same run, below).
    documents = _documents(folder, [[*argv, "--format", "json"] for argv in commands[:-1]])
    store = rk.open_store(f"sqlite:///{folder / 'runs.sqlite3'}")
    outcomes = {name: list(store.get(run).outcomes) for name, run in runs.items()}
    return {
        "folder": folder,
        "commands": commands,
        "documents": documents,
        "runs": runs,
        "outcomes": outcomes,
    }


def _commands(runs: dict[str, str]) -> list[list[str]]:
    a, b, staged = runs["engine-a-first"], runs["engine-b-second"], runs["engine-a-reranked"]
    store = ["--store", STORE]
    return [
        ["show", staged, *store],
        ["show", a, *store],
        ["eval", "--set", "demo", "--retriever", "engine-a-first", "--extra-labels",
         "labels.tsv", "--no-save", *store],
        ["compare", "--run", a, "--run", b, "--set", "demo", "--extra-labels", "labels.tsv",
         "--resamples", "500", *store],
        ["history", "--set", "demo", "--retriever", "engine-a-first", *store],
        ["power", "--set", "demo", "--run", a, "--drop", "0.05", *store],
        ["sweep", "k1grid", "--set", "demo", "--resamples", "300", "--fresh", *store],
    ]  # fmt: skip


def _documents(folder: Path, commands: list[list[str]]) -> list[Any]:
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(commands)],
        cwd=folder, env=_env(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(part) for part in _split(done.stdout)]


def _split(output: str) -> list[str]:
    parts = re.split(rf"^{re.escape(MARK)}\S+\n", output, flags=re.MULTILINE)
    return parts[1:]


def _on_a_pipe(folder: Path, commands: list[list[str]], width: int | None) -> str:
    extra = {} if width is None else {"COLUMNS": str(width)}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(commands)],
        cwd=folder, env=_env(**extra), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _on_a_terminal(folder: Path, commands: list[list[str]], width: int) -> str:
    """stdout a pseudo-terminal ``width`` columns wide, COLUMNS unset: what a person sees."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    errors = folder / f"stderr-{width}.txt"
    with errors.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", DRIVER, json.dumps(commands)],
            cwd=folder, env=_env(), stdin=subprocess.DEVNULL, stdout=child, stderr=stderr,
        )  # fmt: skip
    os.close(child)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    assert process.wait(timeout=600) == 0, errors.read_text(encoding="utf-8", errors="replace")
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return ANSI.sub("", text)


def three(value: float) -> str:
    return f"{value:.3f}"


def signed(value: float) -> str:
    return f"{value:+.3f}"


def p_text(value: float) -> str:
    return "<0.001" if value < 0.001 else three(value)


def _span(ci: list[float] | None, form: Any = three) -> str | None:
    return None if ci is None else f"[{form(ci[0])}, {form(ci[1])}]"


Token = tuple[str, str]  # (the column it is shown in, the text that must stay whole)


def _eval_tokens(document: dict[str, Any], outcomes: list[QuestionOutcome]) -> Iterator[Token]:
    """The JSON summary's values; each question's ids from the stored run (the summary
    counts the questions, ``per_question.jsonl`` holds these same fields)."""
    for name, value in document["metrics"].items():
        yield "metric", name
        if value["mean"] is not None:
            yield "mean", three(value["mean"])
        if (span := _span(value["ci"])) is not None:
            yield "CI", span
        yield "n", str(value["n"])
    for field, labels in document["slices"].items():
        for label, metrics in labels.items():
            yield field, label
            for name in ("hit@1", "hit@3", "rr", "ndcg@10"):
                value = metrics.get(name)
                if value and value["mean"] is not None and value["ci"] is not None:
                    yield name, f"{three(value['mean'])} {_span(value['ci'])}"
    for outcome in outcomes:
        yield "id", outcome.question_id
        for doc in outcome.ranking[:3]:
            yield "top 3", doc
        for doc in outcome.expected:
            yield "expected", doc
    stages = document.get("stages")
    if stages:
        k = stages["attribution_k"]
        shown = ("rr", "hit@1", f"hit@{k}", f"ndcg@{k}")
        for stage in stages["order"]:
            yield "stage", stage
            for name in shown:
                value = stages["metrics"][stage].get(name)
                if value and value["ci"] is not None:
                    yield "mean [CI]", f"{three(value['mean'])} {_span(value['ci'])}"
        for delta in stages["deltas"].values():
            if delta["metric"] in shown and delta["low"] is not None:
                span = _span([delta["low"], delta["high"]], signed)
                yield "Δ [CI]", f"{signed(delta['difference'])} {span}"
                yield "p", p_text(delta["p_value"])
    extra = document.get("extra_labels")
    if extra:
        for name in ("hit@1", "hit@3", "rr", "ndcg@10"):
            yield "set's labels", three(extra["before"][name])
            yield "with extra", three(extra["after"][name])


def _compare_tokens(document: dict[str, Any]) -> Iterator[Token]:
    for system in document["systems"]:
        yield "system", system["label"]
        yield "run", system["run_id"]
        yield "questions", str(system["questions"])
    for pair in document["pairs"]:
        for delta in pair["metrics"]:
            yield "metric", delta["metric"]
            yield pair["baseline"], three(delta["baseline"])
            yield pair["candidate"], three(delta["candidate"])
            yield "diff", signed(delta["difference"])
            if (span := _span(delta["ci"], signed)) is not None:
                yield "CI", span
            yield "W/T/L", f"{delta['wins']}/{delta['ties']}/{delta['losses']}"
            yield "p", p_text(delta["p_value"])
        for change in pair["changed"]:
            yield "question", change["question_id"]
            yield "difference", signed(change["difference"])
    for system, effect in (document.get("extra_labels") or {}).items():
        for name in ("hit@1", "hit@3", "rr", "ndcg@10"):
            yield system, f"{three(effect['before'][name])} → {three(effect['after'][name])}"


def _history_tokens(rows: list[dict[str, Any]]) -> Iterator[Token]:
    for row in rows:
        yield "run id", row["run_id"]
        for name in ("hit@1", "hit@3", "rr"):
            yield name, three(row[name])


def _power_tokens(document: dict[str, Any]) -> Iterator[Token]:
    for row in document["rows"]:
        yield "metric", row["metric"]
        if row["detectable"] is not None:
            yield "detectable drop", f"{row['detectable']:.3f}"
        if row["needed"] is not None:
            yield f"questions for {document['drop']:g}", f"{row['needed']:,}"


def _sweep_tokens(document: dict[str, Any]) -> Iterator[Token]:
    select = document["select"]
    for index, each in enumerate(document["configurations"]):
        yield "#", str(index)
        value = each["metrics"][select]
        yield select, three(value["mean"])
        yield f"{round(document['confidence'] * 100)}% CI", str(_span(value["ci"]))
        yield "p50 ms", f"{each['latency_ms']['p50']:.1f}"
        yield "p95 ms", f"{each['latency_ms']['p95']:.1f}"
        if each["difference"] is not None:
            yield "diff", signed(each["difference"])


NOTE = re.compile(r"left out at \d+ columns: (.*?) \(--format json has every column\)")


def _left_out(output: str) -> set[str]:
    flat = " ".join(output.split())
    return {name for names in NOTE.findall(flat) for name in names.split(", ")}


def _whole(token: str, lines: list[str]) -> bool:
    pattern = re.compile(rf"(?<![\w.@+-]){re.escape(token)}(?![\w.@])")
    return any(pattern.search(line) for line in lines)


def _broken(output: str, tokens: Iterator[Token], width: int | None) -> tuple[int, list[str]]:
    """(values checked, the ones split or cut and not named as left out, lines too wide)."""
    lines = output.splitlines()
    gone = _left_out(output)
    checked, broken = 0, []
    for column, token in tokens:
        checked += 1
        if not _whole(token, lines) and column not in gone:
            broken.append(f"{column}: {token}")
    if width is not None:
        broken += [f"wider than {width}: {line}" for line in lines if cell_len(line) > width]
    return checked, broken


def _check(output: str, tokens: Iterator[Token], width: int | None, where: str) -> None:
    checked, broken = _broken(output, tokens, width)
    assert checked >= 5 and not broken, (where, broken[:10], output)


def _check_all(project: dict[str, Any], output: str, width: int | None, where: str) -> None:
    """Every command's table output against its JSON; the failures of all of them at once."""
    parts = _split(output)
    show_staged, show, extra, compare, history, power = project["documents"]
    folder = project["folder"]
    sweep = json.loads((folder / "sweep-out" / "sweep.json").read_text(encoding="utf-8"))
    outcomes = project["outcomes"]
    checks = (
        (_eval_tokens(show_staged, outcomes["engine-a-reranked"]), "show (stages)"),
        (_eval_tokens(show, outcomes["engine-a-first"]), "show"),
        (_eval_tokens(extra, outcomes["engine-a-first"]), "eval --extra-labels"),
        (_compare_tokens(compare), "compare"),
        (_history_tokens(history), "history"),
        (_power_tokens(power), "power"),
        (_sweep_tokens(sweep), "sweep"),
    )
    assert len(parts) == len(checks), output
    failed = {}
    for part, (tokens, name) in zip(parts, checks, strict=True):
        checked, broken = _broken(part, tokens, width)
        assert checked >= 5, (name, part)
        if broken:
            failed[name] = (len(broken), broken[:3])
    assert not failed, (where, failed)


def _with_sweep_output(commands: list[list[str]]) -> list[list[str]]:
    return [*commands[:-1], [*commands[-1], "--output-dir", "sweep-out"]]


@pytest.mark.parametrize("width", WIDTHS, ids=lambda width: f"COLUMNS={width}")
def test_every_table_on_a_pipe_keeps_each_value_whole(
    project: dict[str, Any], width: int | None
) -> None:
    (project["folder"] / "sweep-out").mkdir(exist_ok=True)
    output = _on_a_pipe(project["folder"], _with_sweep_output(project["commands"]), width)
    _check_all(project, output, width, f"pipe {width}")
    if width is None:
        # No width to fit: nothing is left out, whatever the table's width.
        assert "left out at" not in output
        assert max(map(cell_len, output.splitlines())) > 80


@pytest.mark.parametrize("width", [w for w in WIDTHS if w is not None], ids=str)
def test_every_table_on_a_terminal_keeps_each_value_whole(
    project: dict[str, Any], width: int
) -> None:
    (project["folder"] / "sweep-out").mkdir(exist_ok=True)
    output = _on_a_terminal(project["folder"], _with_sweep_output(project["commands"]), width)
    _check_all(project, output, width, f"terminal {width}")
    if width <= 60:
        assert "left out at" in output  # narrow: columns went, and the output says so


def _widths(seed: int, count: int) -> list[int]:
    rng = random.Random(seed)
    return sorted({*(rng.randint(40, 220) for _ in range(count)), 40, 60, 80, 100, 200})


def test_the_eval_tables_fit_every_width_of_a_rich_terminal(project: dict[str, Any]) -> None:
    store = rk.open_store(f"sqlite:///{project['folder'] / 'runs.sqlite3'}")
    documents = project["documents"][:2]
    names = ["engine-a-reranked", "engine-a-first"]
    for name, document in zip(names, documents, strict=True):
        run_id = project["runs"][name]
        record = store.get(run_id)
        report = EvalReport(record, (), None, store.url, baseline_note="(stored run)")
        for width in _widths(seed=43, count=25):
            console = Console(file=io.StringIO(), force_terminal=True, width=width, no_color=True)
            console.print(eval_renderable(report))
            output = ANSI.sub("", console.file.getvalue())  # type: ignore[attr-defined]
            tokens = _eval_tokens(document, list(record.outcomes))
            _check(output, tokens, width, f"rich {width} {run_id}")


def _random_token(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return f"{rng.random():.3f}"
    if kind == 1:
        low, high = sorted((rng.uniform(-1, 1), rng.uniform(-1, 1)))
        return f"[{low:+.3f}, {high:+.3f}]"
    if kind == 2:
        return f"{rng.random():.3f} [{rng.random():.3f}, {rng.random():.3f}]"
    parts = ["".join(rng.choices("abcdefghij", k=rng.randint(1, 9))) for _ in range(3)]
    return rng.choice(("-", ".", "_", "/")).join(parts[: rng.randint(1, 3)])


def _random_table(rng: random.Random) -> tuple[Any, list[list[str]], list[str], list[int]]:
    from rich import box
    from rich.table import Table

    columns = [
        f"c{index}-{rng.choice(('p', 'hit@1', 'W/T/L', 'mean [CI]'))}"
        for index in range(rng.randint(1, 9))
    ]
    rows = [[_random_token(rng) for _ in columns] for _ in range(rng.randint(0, 6))]
    table = Table(
        title=rng.choice((None, "a title naming engine-a-first and engine-b-second")),
        box=rng.choice((box.HEAVY_HEAD, box.SIMPLE_HEAD, box.ROUNDED)),
        pad_edge=rng.random() < 0.5,
    )
    for column in columns:
        table.add_column(column, justify=rng.choice(("left", "right")))
    for row in rows:
        table.add_row(*row)
    drop = rng.sample(range(len(columns)), rng.randint(0, len(columns)))
    return table, rows, columns, drop


@pytest.mark.parametrize("seed", range(8))
def test_a_fitted_table_never_splits_a_cell_and_names_what_it_leaves_out(seed: int) -> None:
    from retrievalkit.render.fitting import fit

    rng = random.Random(seed)
    for _ in range(60):
        table, rows, columns, drop = _random_table(rng)
        width = rng.randint(40, 200)
        console = Console(file=io.StringIO(), width=width, force_terminal=True, no_color=True)
        console.print(fit(table, drop=drop))
        output = ANSI.sub("", console.file.getvalue())  # type: ignore[attr-defined]
        tokens = [(columns[i], cell) for row in rows for i, cell in enumerate(row)]
        checked, broken = _broken(output, iter(tokens), width)
        assert not broken, (seed, width, broken, output)
        gone = _left_out(output)
        assert gone <= {columns[i] for i in drop}, (gone, drop)  # only what may go, goes
        assert checked == len(tokens)


@pytest.mark.parametrize("seed", range(4))
def test_a_log_console_draws_each_table_whole_at_its_natural_width(seed: int) -> None:
    from retrievalkit.render.fitting import LogConsole, fit

    rng = random.Random(100 + seed)
    for _ in range(40):
        table, rows, columns, drop = _random_table(rng)
        log = LogConsole(file=io.StringIO(), width=80, no_color=True)
        log.print(fit(table, drop=drop))
        output = log.file.getvalue()  # type: ignore[attr-defined]
        tokens = [(columns[i], cell) for row in rows for i, cell in enumerate(row)]
        assert _broken(output, iter(tokens), None)[1] == [], output
        assert "left out at" not in output
        for column in columns:
            assert _whole(column, output.splitlines()), (column, output)
