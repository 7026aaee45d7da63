"""Generated bad bytes in every text file a built-in command or plugin reads.

Each reader is given a valid file with one invalid UTF-8 sequence put at a random place
of a random line (a lone continuation byte, an overlong form, a surrogate, a truncated
sequence, 0xFF...), and must refuse it with an `InputError` naming the file and that
line; on the command line that is exit code 2 and one line, never a traceback.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from retrievalkit.errors import InputError

BAD = [
    b"\xff",
    b"\xfe",
    b"\x80",
    b"\xbf\xbf",
    b"\xc0\x80",
    b"\xc1\xbf",
    b"\xed\xa0\x80",
    b"\xf5\x80\x80\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xe2\x82",
    b"\xc3",
    b"\xf0\x9f\x98",
]
SEEDS = range(10)


def spoil(path: Path, rng: random.Random, *, first: int = 1) -> int:
    """Put an invalid UTF-8 sequence into a random line (from ``first``) of ``path``;
    returns the line's number."""
    lines = path.read_bytes().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    number = rng.randint(first, len(lines))
    line = lines[number - 1]
    at = rng.randint(0, len(line))
    lines[number - 1] = line[:at] + rng.choice(BAD) + line[at:]
    ending = rng.choice([b"\n", b"\r\n"])
    path.write_bytes(ending.join(lines) + ending)
    return number


def _corpus(folder: Path, rng: random.Random) -> Path:
    path = folder / "corpus.jsonl"
    rows = [
        {"_id": f"d{i}", "title": f"title {i}", "text": "words " * rng.randint(1, 6)}
        for i in range(rng.randint(3, 12))
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _run_file(folder: Path, rng: random.Random) -> Path:
    path = folder / "run.trec"
    lines = [f"q{i} Q0 d{j} {j + 1} {10 - j} sys" for i in range(4) for j in range(3)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _qrels(folder: Path, rng: random.Random) -> Path:
    path = folder / "qrels.txt"
    path.write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(rng.randint(3, 9))), "utf-8")
    return path


def _queries_tsv(folder: Path, rng: random.Random) -> Path:
    path = folder / "queries.tsv"
    path.write_text("".join(f"q{i}\tquestion {i}\n" for i in range(rng.randint(3, 9))), "utf-8")
    return path


def _queries_beir(folder: Path, rng: random.Random) -> Path:
    path = folder / "queries.jsonl"
    rows = [{"_id": f"q{i}", "text": f"question {i}"} for i in range(rng.randint(3, 9))]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _labels(folder: Path, rng: random.Random) -> Path:
    path = folder / "labels.tsv"
    rows = [f"q{i}\td{i}\t{rng.randint(0, 3)}\tjudge\tmodel\tv1\t2024" for i in range(9)]
    path.write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def _golden(folder: Path, rng: random.Random) -> Path:
    path = folder / "set.jsonl"
    rows = [{"id": f"q{i}", "question": f"question {i}", "expected": [f"d{i}"]} for i in range(6)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _config(folder: Path, rng: random.Random) -> Path:
    path = folder / "retrievalkit.toml"
    path.write_text(
        '[eval]\nk = [1, 3]\n\n[retrievers.r]\nplugin = "bm25"\ncorpus = "corpus.jsonl"\n'
        '\n[sweeps.s]\nretriever = "r"\ngrid = { k1 = [0.5, 0.9] }\n',
        encoding="utf-8",
    )
    return path


def _folder_document(folder: Path, rng: random.Random) -> Path:
    (folder / "docs").mkdir()
    for i in range(3):
        (folder / "docs" / f"page{i}.md").write_text(f"# Page {i}\n\nline\nline\n", "utf-8")
    return folder / "docs" / f"page{rng.randrange(3)}.md"


def _example_csv(folder: Path, rng: random.Random) -> Path:
    path = folder / "set.csv"
    rows = [f"q{i},question {i},MATCH,d{i},,normal," for i in range(6)]
    path.write_text("id,question,form,expected,grades,hard_class,gist\n" + "\n".join(rows)
                    + "\n", encoding="utf-8")  # fmt: skip
    return path


def _read_folder(path: Path) -> Any:
    from retrievalkit.corpora.providers import create_folder

    return list(create_folder(path.parent).documents())


def _read_config(path: Path) -> Any:
    from retrievalkit.formats.config import find_config

    return find_config(str(path))


def _read_set(path: Path) -> Any:
    from retrievalkit.formats.golden_sets import load_set_file

    return load_set_file(path)


def _read_corpus(path: Path) -> Any:
    from retrievalkit.formats.corpus import read_corpus

    return list(read_corpus(path))


def _read_run(path: Path) -> Any:
    from retrievalkit.formats.trec import read_run

    return read_run(path)


def _read_qrels(path: Path) -> Any:
    from retrievalkit.formats.trec import read_qrels

    return read_qrels(path)


def _read_queries(path: Path) -> Any:
    from retrievalkit.retrievers.run import question_ids_from

    return question_ids_from(str(path))


def _read_labels(path: Path) -> Any:
    from retrievalkit.formats.labels import read_labels

    return read_labels(path)


def _example_plugin(module: str) -> Any:
    """A module of the example plugin (plugins/retrievalkit-example), from its source
    folder when it is not installed: the readers are plain functions and classes, needing
    no entry point."""
    import importlib
    import sys

    source = str(Path(__file__).resolve().parents[1] / "plugins" / "retrievalkit-example" / "src")
    if source not in sys.path:
        sys.path.append(source)
    return importlib.import_module(module)


def _read_example_csv(path: Path) -> Any:
    return _example_plugin("retrievalkit_example.questions").load_csv(path)


READERS: dict[str, tuple[Callable[[Path, random.Random], Path], Callable[[Path], Any], int]] = {
    # name: (write a valid file, read it, first line a bad byte may go on)
    "beir corpus": (_corpus, _read_corpus, 1),
    "trec run": (_run_file, _read_run, 1),
    "trec qrels": (_qrels, _read_qrels, 1),
    "run queries tsv": (_queries_tsv, _read_queries, 1),
    "run queries beir": (_queries_beir, _read_queries, 1),
    "labels": (_labels, _read_labels, 1),
    "golden set": (_golden, _read_set, 1),
    "config": (_config, _read_config, 1),
    "folder corpus": (_folder_document, _read_folder, 1),
    "example plugin csv": (_example_csv, _read_example_csv, 1),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_bad_byte_is_refused_naming_the_file_and_its_line(
    tmp_path: Path, reader: str, seed: int
) -> None:
    write, read, first = READERS[reader]
    rng = random.Random(f"{reader}-{seed}")
    path = write(tmp_path, rng)
    read(path)  # the valid file reads
    line = spoil(path, rng, first=first)
    with pytest.raises(InputError) as raised:
        read(path)
    error = raised.value
    assert error.source is not None and Path(error.source).name == path.name, str(error)
    assert error.line == line, str(error)
    assert "UTF-8" in str(error)


# --- the command line: exit code 2, the file and the line, no traceback -------------------


def _project(folder: Path) -> None:
    rng = random.Random(0)
    _corpus(folder, rng)
    _golden(folder, rng)
    (folder / "queries.tsv").write_text(
        "".join(f"q{i}\tquestion {i}\n" for i in range(6)), encoding="utf-8"
    )
    (folder / "run.trec").write_text(
        "".join(f"q{i} Q0 d{i} 1 9 sys\n" for i in range(6)), encoding="utf-8"
    )
    (folder / "labels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{(i + 1) % 6}\t1\n" for i in range(6)),
        encoding="utf-8",
    )
    (folder / "retrievalkit.toml").write_text(
        '[retrievers.replay]\nplugin = "run"\npath = "run.trec"\nqueries = "queries.tsv"\n'
        '[retrievers.words]\nplugin = "bm25"\ncorpus = "corpus.jsonl"\n',
        encoding="utf-8",
    )


EVAL_REPLAY = ("eval", "--set", "set.jsonl", "--retriever", "replay", "--no-save")
COMMANDS = {
    "queries.tsv": EVAL_REPLAY,
    "run.trec": EVAL_REPLAY,
    "corpus.jsonl": ("eval", "--set", "set.jsonl", "--retriever", "words", "--no-save"),
    "labels.tsv": (*EVAL_REPLAY, "--extra-labels", "labels.tsv"),
    "set.jsonl": EVAL_REPLAY,
    "retrievalkit.toml": EVAL_REPLAY,
}


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_command_line_exits_2_naming_the_file_and_line(
    cli: Any, tmp_path: Path, name: str, seed: int
) -> None:
    _project(tmp_path)
    line = spoil(tmp_path / name, random.Random(f"{name}-{seed}"))
    done = cli(*COMMANDS[name])
    assert done.returncode == 2, done.stderr
    assert name in done.stderr and f"line {line}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "UnicodeDecodeError" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


# --- stores: an undecodable file is a store error naming it, never a UnicodeDecodeError ---


def _a_run() -> Any:
    import retrievalkit as rk

    golden = rk.GoldenQuestionSet(
        "enc", [rk.GoldenQuestion(id="q1", question="question 1", expected=["d1"])]
    )

    class One:
        identifier = "one"

        def retrieve(self, question: str, limit: int) -> list[str]:
            return ["d1"]

    return rk.evaluate(golden, One(), k=(1,), git_commit=None)


@pytest.mark.parametrize("seed", range(4))
def test_an_undecodable_pins_file_is_a_store_error_naming_it(tmp_path: Path, seed: int) -> None:
    import retrievalkit as rk
    from retrievalkit.errors import StoreError

    run = _a_run()
    store = rk.open_store(f"jsonl:///{tmp_path / 'runs.jsonl'}")
    store.save(run.record)
    store.pin(run.record)
    pins = store.pins_path
    spoil(pins, random.Random(seed))
    with pytest.raises(StoreError) as raised:
        store.pinned(run.record.set, run.record.model)
    assert pins.name in str(raised.value) and "UTF-8" in str(raised.value)


@pytest.mark.parametrize("seed", range(4))
def test_an_undecodable_run_of_the_example_store_is_a_store_error(
    tmp_path: Path, seed: int
) -> None:
    from retrievalkit.errors import StoreError

    rundir = _example_plugin("retrievalkit_example.rundir")
    run = _a_run()
    store = rundir.RunDirStore.from_url(f"rundir:///{tmp_path / 'runs'}")
    store.save(run.record)
    (path,) = [p for p in (tmp_path / "runs").rglob("*") if p.is_file() and p.name != ".lock"]
    spoil(path, random.Random(seed))
    with pytest.raises(StoreError) as raised:
        store.all_runs()
    assert path.name in str(raised.value) and "UTF-8" in str(raised.value)
