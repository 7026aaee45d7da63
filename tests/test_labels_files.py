"""Generated labels files (``--extra-labels``, serve's labels, BEIR qrels) gone wrong.

Every class is refused with the file and the line (exit code 2) or said in a warning
naming the file, never read silently and never exit code 3: a field past csv's size
limit or a quote left open, a grade that is not a whole number from 0 to the limit, a
file with no labels, labels of questions the set does not have, one pair graded twice
with different grades (in a file, or across files), and a store given as the labels.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any

import pytest

from retrievalkit.errors import InputError
from retrievalkit.formats.labels import read_extra_labels, read_labels
from retrievalkit.formats.limits import MAX_GRADE

SEEDS = range(12)
HEADER = "query-id\tcorpus-id\tscore\tjudge\tmodel\tprompt-version\tjudged-at\n"


def rows(rng: random.Random, count: int, questions: int = 6) -> list[list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    while len(found) < count:
        pair = (f"q{rng.randrange(questions)}", f"d{rng.randrange(40)}")
        found[pair] = [*pair, str(rng.randint(0, 3)), "judge", "model-x", "v1", "2026-01-01"]
    return list(found.values())


def write(path: Path, lines: list[list[str]], header: bool = True) -> Path:
    text = (HEADER if header else "") + "".join("\t".join(row) + "\n" for row in lines)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("seed", SEEDS)
def test_a_field_past_the_csv_limit_or_an_open_quote_names_the_line(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    lines = rows(rng, rng.randint(3, 12))
    where = rng.randrange(len(lines))
    column = rng.randrange(7)
    lines[where][column] = "x" * (csv.field_size_limit() + rng.randint(1, 5000))
    path = write(tmp_path / "labels.tsv", lines)
    with pytest.raises(InputError) as raised:
        read_labels(path)
    assert raised.value.source == str(path)
    assert raised.value.line == where + 2  # after the header
    assert "longer than" in str(raised.value) or "must be" in str(raised.value)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_quote_left_open_is_refused_where_it_starts_or_where_it_ends(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    lines = rows(rng, rng.randint(3, 12))
    where = rng.randrange(len(lines))
    lines[where][rng.choice([0, 1])] = '"' + lines[where][0]
    path = write(tmp_path / "labels.tsv", lines)
    with pytest.raises(InputError) as raised:
        read_labels(path)
    # The open quote swallows the lines after it into one field: the error is on the
    # line it starts or on a later one, always a line of the file.
    assert raised.value.source == str(path)
    assert raised.value.line is not None and where + 2 <= raised.value.line <= len(lines) + 2


BAD_GRADES = ["-1", "1.5", "1_0", "\u0663", "+1", "abc", "", "1e3", str(MAX_GRADE + 1),
              "9" * 30, "0x3", "2 3"]  # fmt: skip


@pytest.mark.parametrize("seed", SEEDS)
def test_a_grade_out_of_range_names_the_line_and_the_column(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    lines = rows(rng, rng.randint(3, 12))
    where = rng.randrange(len(lines))
    bad = BAD_GRADES[seed % len(BAD_GRADES)]
    lines[where][2] = bad
    path = write(tmp_path / "labels.tsv", lines)
    with pytest.raises(InputError) as raised:
        read_labels(path)
    assert (raised.value.line, raised.value.field) == (where + 2, "score"), str(raised.value)
    assert f"0 to {MAX_GRADE:,}" in str(raised.value)


def test_grades_in_range_are_read_as_written(tmp_path: Path) -> None:
    path = write(tmp_path / "labels.tsv", [["q1", "d1", "0"], ["q1", "d2", str(MAX_GRADE)]])
    assert [label.grade for label in read_labels(path)] == [0, MAX_GRADE]


@pytest.mark.parametrize("seed", SEEDS)
def test_pairs_graded_twice_with_different_grades_are_warned_about(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    lines = rows(rng, rng.randint(4, 12))
    twice = rng.sample(range(len(lines)), rng.randint(1, min(3, len(lines))))
    again = []
    for index in twice:
        row = list(lines[index])
        row[2] = str((int(row[2]) + rng.randint(1, 3)) % 4)
        again.append(row)
    # The same grade again is no conflict.
    same = [list(row) for index, row in enumerate(lines) if index not in twice][:1]
    path = write(tmp_path / "labels.tsv", [*lines, *again, *same])
    extra = read_extra_labels([str(path)])
    said = [warning for warning in extra.warnings if "graded twice" in warning]
    assert len(said) == 1 and said[0].startswith(str(path))
    assert f"{len(twice)} (question, document) pair(s)" in said[0]
    first = twice[0]
    assert f"line {first + 2}" in said[0] and f"line {len(lines) + 2}" in said[0]
    # The later line counts.
    grades = {label.pair: label.grade for label in extra}
    for row in again:
        assert grades[row[0], row[1]] == int(row[2])


def test_a_persons_correction_of_their_own_grade_is_no_conflict(tmp_path: Path) -> None:
    lines = [
        ["q1", "d1", "1", "human", "ana", "", "t1"],
        ["q1", "d1", "3", "human", "ana", "", "t2"],
    ]
    extra = read_extra_labels([str(write(tmp_path / "human.tsv", lines))])
    assert extra.warnings == ()
    assert [label.grade for label in extra] == [3]


@pytest.mark.parametrize("seed", SEEDS)
def test_pairs_graded_differently_in_two_files_are_warned_about(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    first = rows(rng, rng.randint(3, 10))
    second = [list(row) for row in rng.sample(first, rng.randint(1, len(first)))]
    changed = rng.sample(range(len(second)), rng.randint(1, len(second)))
    for index in changed:
        second[index][2] = str((int(second[index][2]) + 1) % 4)
    a = write(tmp_path / "a.tsv", first)
    b = write(tmp_path / "b.tsv", second)
    extra = read_extra_labels([str(a), str(b)])
    said = [warning for warning in extra.warnings if "earlier labels file" in warning]
    assert len(said) == 1 and said[0].startswith(str(b)) and str(a) in said[0]
    assert f"{len(changed)} pair(s)" in said[0]


@pytest.mark.parametrize("content", ["", HEADER, HEADER + "\n\n", "\n", "\ufeff" + HEADER])
def test_a_file_with_no_labels_is_warned_about(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.tsv"
    path.write_text(content, encoding="utf-8")
    extra = read_extra_labels([str(path)])
    assert extra.warnings == (f"{path} holds no labels: nothing is merged from it",)


@pytest.mark.parametrize("seed", SEEDS)
def test_labels_of_questions_not_in_the_set_are_counted_per_file(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    lines = rows(rng, rng.randint(3, 14), questions=12)
    path = write(tmp_path / "labels.tsv", lines)
    known = {f"q{i}" for i in rng.sample(range(12), rng.randint(0, 11))}
    unknown = [row for row in lines if row[0] not in known]
    warnings = read_extra_labels([str(path)]).unknown_questions(known, "set s")
    if not unknown:
        assert warnings == []
    elif len(unknown) == len(lines):
        assert len(warnings) == 1 and "none of its" in warnings[0]
    else:
        assert warnings == [
            f"{path}: {len(unknown)} of its {len(lines)} labels are for question ids not in "
            f"set s (e.g. {unknown[0][0]!r}); they are left out"
        ]


# --- the command line ---------------------------------------------------------------------


def _project(folder: Path, questions: int = 6) -> None:
    (folder / "set.jsonl").write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": f"question {i}", "expected": [f"d{i}"]}) + "\n"
            for i in range(questions)
        ),
        encoding="utf-8",
    )
    (folder / "queries.tsv").write_text(
        "".join(f"q{i}\tquestion {i}\n" for i in range(questions)), encoding="utf-8"
    )
    (folder / "run.trec").write_text(
        "".join(f"q{i} Q0 d{i + j} {j + 1} {9 - j} sys\n" for i in range(questions)
                for j in range(3)),
        encoding="utf-8",
    )  # fmt: skip
    (folder / "retrievalkit.toml").write_text(
        '[retrievers.replay]\nplugin = "run"\npath = "run.trec"\nqueries = "queries.tsv"\n',
        encoding="utf-8",
    )


EVAL = ("eval", "--set", "set.jsonl", "--retriever", "replay")


def test_eval_warns_about_unknown_questions_empty_files_and_conflicts(
    cli: Any, tmp_path: Path
) -> None:
    _project(tmp_path)
    write(tmp_path / "other.tsv", [["x1", "d1", "1"], ["x2", "d2", "1"]])
    write(tmp_path / "some.tsv", [["q1", "d2", "1"], ["zz", "d2", "1"], ["q1", "d2", "0"]])
    (tmp_path / "empty.tsv").write_text("", encoding="utf-8")
    done = cli(*EVAL, "--no-save", "--extra-labels", "other.tsv", "--extra-labels",
               "some.tsv", "--extra-labels", "empty.tsv")  # fmt: skip
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "--extra-labels" in line]
    assert any("other.tsv: none of its 2 labels" in line for line in warnings), warnings
    assert any("some.tsv: 1 of its 2 labels" in line and "'zz'" in line for line in warnings)
    assert any("some.tsv: 1 (question, document) pair(s) graded twice" in line
               for line in warnings)  # fmt: skip
    assert any("empty.tsv holds no labels" in line for line in warnings)


@pytest.mark.parametrize("seed", range(3))
def test_eval_refuses_a_bad_labels_line_with_exit_2(cli: Any, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    _project(tmp_path)
    lines = rows(rng, 6)
    where = rng.randrange(len(lines))
    if seed == 0:
        lines[where][4] = "m" * (csv.field_size_limit() + 10)
    else:
        lines[where][2] = BAD_GRADES[rng.randrange(len(BAD_GRADES))] or "-2"
    write(tmp_path / "labels.tsv", lines)
    done = cli(*EVAL, "--no-save", "--extra-labels", "labels.tsv")
    assert done.returncode == 2, done.stderr
    assert f"labels.tsv, line {where + 2}" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("store", ["sqlite", "jsonl"])
def test_a_store_given_as_the_labels_is_refused_by_every_command(
    cli: Any, tmp_path: Path, store: str
) -> None:
    _project(tmp_path)
    path = tmp_path / f"runs.{'sqlite3' if store == 'sqlite' else 'jsonl'}"
    url = f"{store}:///{path.name}"
    assert cli(*EVAL, "--store", url).returncode == 0
    import retrievalkit as rk

    (stored,) = rk.open_store(f"{store}:///{path}").all_runs()
    before = path.read_bytes()
    for command in (
        (*EVAL, "--store", url, "--extra-labels", path.name),
        ("compare", "--set", "set.jsonl", "--retriever", "replay", "--retriever", "replay",
         "--no-save", "--store", url, "--extra-labels", path.name),
        ("judge-agreement", "--labels", path.name, "--set", "set.jsonl", "--corpus", "set.jsonl",
         "--judge", "none"),
        ("serve", "--store", url, "--labels", path.name, "--port", "0"),
        ("judge", stored.run_id, "--store", url, "--output", path.name, "--judge", "none",
         "--corpus", "set.jsonl"),
    ):  # fmt: skip
        done = cli(*command)
        assert done.returncode == 2, (command, done.stderr)
        assert path.name in done.stderr and "Traceback" not in done.stderr, done.stderr
    # The store is whole after all of them.
    assert path.read_bytes() == before
    assert cli("history", "--set", "set", "--retriever", "replay", "--store", url).returncode == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_label_ids_are_read_in_nfc_as_every_other_id(tmp_path: Path, seed: int) -> None:
    import unicodedata

    rng = random.Random(seed)
    composed = "éÅñếḱ한글Ǻǘ"
    ids = ["".join(rng.choice("ab-" + composed) for _ in range(rng.randint(1, 6))) for _ in "xy"]
    spelled = [unicodedata.normalize(rng.choice(["NFC", "NFD"]), text) for text in ids]
    (label,) = read_labels(write(tmp_path / "labels.tsv", [[*spelled, "2"]]))
    assert label.pair == tuple(unicodedata.normalize("NFC", text) for text in ids)
