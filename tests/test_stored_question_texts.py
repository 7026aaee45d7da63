"""A stored run keeps what its questions asked, so its views stand without its set.

A run evaluated on a set file is copied (its store) to a place where that file is gone:
`serve`'s question and judging pages, `compare --run` and `report` show the texts the run
was asked, as they were when it was asked, and a run stored before texts were kept (an
`Outcomes` without them) reads back with none and says that its set was not found.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli

import retrievalkit as rk
from retrievalkit.formats.config import Config
from retrievalkit.model.outcomes import QUESTION_TEXTS, Outcomes
from retrievalkit.model.records import ResultRecord
from retrievalkit.stores import open_store
from retrievalkit.stores.columns import column_names, columns_header, decode_columns, encode_columns

STORES = ("sqlite", "jsonl")
#: A question text no set on this machine holds, with markup and characters from far planes.
ASKED = 'which <b>engine</b> ranks "quotes" & ümlauts 𝔘? {n}'


def _set_file(folder: Path) -> Path:
    """The demo set's questions under new texts, as a set file of its own."""
    demo = rk.load_set("demo")
    lines = []
    for number, question in enumerate(demo.questions[:12]):
        row: dict[str, Any] = {
            "id": question.id,
            "question": ASKED.format(n=number) if number % 3 else question.question,
            "expected": list(question.expected),
            "form": question.form.value,
        }
        lines.append(json.dumps(row, ensure_ascii=False))
    path = folder / "asked.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _url(folder: Path, backend: str) -> str:
    name = "runs.sqlite3" if backend == "sqlite" else "runs.jsonl"
    return f"{backend}:///{folder / name}"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[ResultRecord], Path]:
    """Two runs of a set file, saved in both stores; the set file is then deleted."""
    folder = tmp_path_factory.mktemp("stored-texts")
    path = _set_file(folder)
    config = Config(sets={"asked": path})
    moment = dt.datetime(2031, 1, 1, tzinfo=dt.timezone.utc)
    records = [
        rk.evaluate(
            "asked", "bm25-demo", resamples=100, git_commit=None, config=config,
            now=moment + dt.timedelta(minutes=number), k=[1, 3, 10],
        ).record
        for number in range(2)
    ]  # fmt: skip
    for backend in STORES:
        store = open_store(_url(folder, backend))
        for record in records:
            store.save(record)
    texts = {q.id: q.question for q in rk.load_set(path).questions}
    (folder / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    path.unlink()
    return folder, records, folder / "texts.json"


def _texts(made: tuple[Path, list[ResultRecord], Path]) -> dict[str, str]:
    loaded: dict[str, str] = json.loads(made[2].read_text(encoding="utf-8"))
    return loaded


def test_a_run_keeps_the_text_of_every_question_it_asked(
    made: tuple[Path, list[ResultRecord], Path],
) -> None:
    _, records, _ = made
    texts = _texts(made)
    assert records[0].outcomes.known_texts() == texts
    assert len(set(texts.values())) > 1 and any("<b>" in text for text in texts.values())


@pytest.mark.parametrize("backend", STORES)
def test_texts_read_back_from_either_store_as_they_were_asked(
    made: tuple[Path, list[ResultRecord], Path], backend: str
) -> None:
    folder, records, _ = made
    stored = open_store(_url(folder, backend)).get(records[1].run_id)
    assert stored is not None
    assert stored.outcomes.question_texts == records[1].outcomes.question_texts
    assert stored.outcomes.known_texts() == _texts(made)


def test_outcomes_without_texts_store_no_column_and_read_back_none() -> None:
    """Outcomes built from `QuestionOutcome` values know no text: no column is stored
    (the stored form of a run made before texts were kept), and every text reads None."""
    run = rk.evaluate("demo", "bm25-demo", resamples=50, git_commit=None)
    without = Outcomes.from_outcomes(list(run.record.outcomes))
    assert QUESTION_TEXTS not in column_names(without)
    assert QUESTION_TEXTS in column_names(run.record.outcomes)
    encoded = encode_columns(without)
    read = decode_columns(columns_header(without), encoded.__getitem__)
    assert read.question_texts == (None,) * len(without)
    assert read.known_texts() == {}
    assert QUESTION_TEXTS not in column_names(read)
    # Texts leave equality alone, as a QuestionOutcome has none.
    assert read == run.record.outcomes


def test_stored_columns_are_written_back_as_they_were_read() -> None:
    """Outcomes read from a store and not yet decoded re-encode to their stored bytes,
    texts included, and decoding them gives every text back; a header naming no texts
    column decodes none without asking the store for it."""
    run = rk.evaluate("demo", "bm25-demo", resamples=50, git_commit=None)
    outcomes = run.record.outcomes
    encoded = encode_columns(outcomes)
    header = columns_header(outcomes)
    assert QUESTION_TEXTS in header["columns"]
    again = encode_columns(decode_columns(header, encoded.__getitem__))
    assert again == encoded
    assert decode_columns(header, encoded.__getitem__).question_texts == outcomes.question_texts
    asked: list[str] = []

    def load(name: str) -> bytes:
        asked.append(name)
        return encoded[name]

    older = dict(header, columns=[name for name in header["columns"] if name != QUESTION_TEXTS])
    assert decode_columns(older, load).question_texts == (None,) * len(outcomes)
    assert QUESTION_TEXTS not in asked
    subset = outcomes.take([3, 1])
    assert subset.question_texts == (outcomes.question_texts[3], outcomes.question_texts[1])


def test_a_text_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(ValueError, match="question_texts"):
        Outcomes.from_arrays(["a"], {}, question_texts=[3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="question_texts must hold 1"):
        Outcomes.from_arrays(["a"], {}, question_texts=["x", "y"])


@pytest.mark.parametrize("backend", STORES)
def test_serve_shows_the_stored_text_when_the_set_is_gone(
    made: tuple[Path, list[ResultRecord], Path], backend: str, tmp_path: Path
) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from retrievalkit.api import Thresholds
    from retrievalkit.serve.app import create_app
    from retrievalkit.serve.judging_queue import LabelsFile
    from retrievalkit.serve.views import Site

    folder, records, _ = made
    site = Site(
        store=open_store(_url(folder, backend)),
        config=Config(sets={"asked": folder / "asked.jsonl"}),
        labels=LabelsFile(tmp_path / "labels.jsonl"),
        thresholds=Thresholds(),
    )
    app = create_app(site, host="127.0.0.1", port=8765, token=None)
    client = TestClient(app, base_url="http://127.0.0.1:8765", follow_redirects=False)
    run_id = records[1].run_id
    for question_id, text in _texts(made).items():
        page = client.get("/question", params={"run": run_id, "id": question_id})
        assert page.status_code == 200, page.text
        assert text in html.unescape(page.text)  # shown as written ...
        assert "<b>engine" not in page.text  # ... and inert
        assert "its set was not found here" not in page.text
    compared = client.get("/compare", params={"run": run_id, "other": records[0].run_id})
    assert compared.status_code == 200, compared.text


def test_compare_and_report_of_stored_runs_show_the_stored_texts(
    made: tuple[Path, list[ResultRecord], Path], cli: RunCli, tmp_path: Path
) -> None:
    folder, records, _ = made
    shutil.copy(folder / "runs.sqlite3", tmp_path / "copied.sqlite3")
    store = f"sqlite:///{tmp_path / 'copied.sqlite3'}"
    report = cli("report", records[1].run_id, "--store", store, "--output", "report.html")
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "No question texts" not in page
    texts = _texts(made)
    assert "<b>engine" not in page
    shown = [text for text in texts.values() if text in html.unescape(page)]
    assert len(shown) == len(texts), sorted(set(texts.values()) - set(shown))
