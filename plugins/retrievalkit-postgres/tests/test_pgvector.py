"""The pgvector retriever and ``retrievalkit pg index`` on SciFact, against the real server."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from support import cli, shared_data

from retrievalkit.embedders import create_embedder
from retrievalkit.retrievers.dense import document_text

SCIFACT = shared_data() / "scifact"


@pytest.fixture(scope="module")
def scifact_table(pg_url: str) -> Iterator[str]:
    """SciFact embedded by the built-in WordLlama embedder, HNSW m=16 ef_construction=64."""
    name = f"rk_scifact_{secrets.token_hex(4)}"
    done = cli(
        "pg",
        "index",
        "--corpus",
        str(SCIFACT),
        "--table",
        name,
        "--url",
        pg_url,
        "--embedder",
        "wordllama",
        "--m",
        "16",
        "--ef-construction",
        "64",
    )
    assert done.returncode == 0, done.stderr
    assert f"indexed 5183 documents into {name}" in done.stdout
    assert (
        "wordllama/l2_supercat_256 (256 dimensions, cosine), HNSW m=16 ef_construction=64"
        in done.stdout
    )
    yield name
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(f"DROP TABLE IF EXISTS {name}")


def write_config(folder: Path, pg_url: str, table: str, **retrievers: dict[str, Any]) -> None:
    lines = []
    for name, options in retrievers.items():
        lines.append(f"[retrievers.{name}]")
        settings = {
            "plugin": "pgvector",
            "url": pg_url,
            "table": table,
            "embedder": "wordllama",
            **options,
        }
        for key, value in settings.items():
            lines.append(f"{key} = {toml_value(value)}")
    (folder / "retrievalkit.toml").write_text("\n".join(lines) + "\n")


def toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {toml_value(item)}" for key, item in value.items()) + "}"
    return json.dumps(value)


def scifact_sample(folder: Path, questions: int = 100) -> Path:
    """The first SciFact test questions with their judgments, as a golden set file."""
    texts = {}
    for line in (SCIFACT / "queries.jsonl").open():
        query = json.loads(line)
        texts[query["_id"]] = query["text"]
    grades: dict[str, dict[str, int]] = {}
    for line in (SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        query_id, doc_id, grade = line.split("\t")
        grades.setdefault(query_id, {})[doc_id] = int(grade)
    path = folder / "scifact-sample.jsonl"
    chosen = list(grades.items())[:questions]
    path.write_text(
        "".join(
            json.dumps({"id": qid, "question": texts[qid], "expected": sorted(g), "grades": g})
            + "\n"
            for qid, g in chosen
        )
    )
    return path


def test_the_table_records_its_model_and_index_and_holds_the_embedders_vectors(
    pg_url: str, scifact_table: str
) -> None:
    with psycopg.connect(pg_url) as connection:
        comment = connection.execute(
            "SELECT obj_description(%s::regclass, 'pg_class')", (scifact_table,)
        ).fetchone()[0]  # type: ignore[index]
        index = connection.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexdef LIKE '%%hnsw%%'",
            (scifact_table,),
        ).fetchone()[0]  # type: ignore[index]
        rows = connection.execute(
            f"SELECT id, title, body, embedding::text FROM {scifact_table}"
            " ORDER BY random() LIMIT 40"
        ).fetchall()
    recorded = json.loads(comment)
    assert recorded["model_id"] == "wordllama/l2_supercat_256"
    assert (recorded["m"], recorded["ef_construction"], recorded["documents"]) == (16, 64, 5183)
    assert "vector_cosine_ops" in index and "m='16'" in index and "ef_construction='64'" in index
    from retrievalkit.formats.corpus import CorpusDocument

    embedder = create_embedder("wordllama")
    texts = [document_text(CorpusDocument(id=row[0], title=row[1], text=row[2])) for row in rows]
    stored = np.array([json.loads(row[3]) for row in rows], dtype=np.float32)
    assert np.array_equal(stored, embedder.embed(texts))  # the same bits as the dense retriever's


def test_exact_search_returns_the_true_nearest_neighbours(pg_url: str, scifact_table: str) -> None:
    from retrievalkit_postgres.retriever import create_pgvector

    exact = create_pgvector(url=pg_url, table=scifact_table, embedder="wordllama", search="exact")
    with psycopg.connect(pg_url) as connection:
        rows = connection.execute(f"SELECT id, embedding::text FROM {scifact_table}").fetchall()
    ids = [row[0] for row in rows]
    matrix = np.array([json.loads(row[1]) for row in rows], dtype=np.float64)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    questions = [json.loads(line)["text"] for line in (SCIFACT / "queries.jsonl").open()][:40]
    queries = create_embedder("wordllama").embed(questions).astype(np.float64)
    for question, vector in zip(questions, queries, strict=True):
        found = exact.retrieve_scored(question, 10)
        truth = matrix @ (vector / np.linalg.norm(vector))
        for doc_id, score in found:
            assert score == pytest.approx(truth[ids.index(doc_id)], abs=1e-5)
        # Nothing outside the ten is nearer than the tenth (up to float32 rounding).
        assert np.sort(truth)[-10] <= found[-1][1] + 1e-5
        assert [score for _, score in found] == sorted((s for _, s in found), reverse=True)
    # The batch path (every query in one pipeline) answers as the one-by-one path does.
    assert exact.retrieve_many(questions, 10) == [exact.retrieve(q, 10) for q in questions]
    described = exact.describe()
    assert described["pgvector.search"] == "exact" and "pgvector.ef_search" not in described


def test_eval_records_the_model_and_fidelity_measures_ann_recall(
    pg_url: str, store_url: str, scifact_table: str, tmp_path: Path
) -> None:
    write_config(
        tmp_path,
        pg_url,
        scifact_table,
        **{"pg-hnsw": {}, "pg-ef10": {"ef_search": 10}, "pg-exact": {"search": "exact"}},
    )
    sample = scifact_sample(tmp_path)
    done = cli(
        "eval",
        "--set",
        str(sample),
        "--retriever",
        "pg-hnsw",
        "--k",
        "1,3,10,100",
        "--store",
        store_url,
        "--format",
        "json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    manifest = summary["manifest"]
    assert manifest["embedding_backend"] == "pgvector"
    assert manifest["embedding_model_id"] == "wordllama/l2_supercat_256"
    extra = manifest["extra"]
    assert (extra["pgvector.m"], extra["pgvector.ef_construction"]) == ("16", "64")
    assert extra["pgvector.search"] == "hnsw" and extra["pgvector.ef_search"] == "40"
    assert extra["pgvector.ef_search_used"] == "max(ef_search, limit)"
    assert extra["pgvector.table"] == scifact_table and extra["pgvector.version"] == "0.6.2"
    assert 0.3 < summary["metrics"]["ndcg@10"]["mean"] < 0.9
    recalls = {}
    for candidate in ("pg-ef10", "pg-hnsw"):
        fidelity = cli(
            "fidelity",
            "--set",
            str(sample),
            "--retriever",
            candidate,
            "--reference",
            "pg-exact",
            "--k",
            "10",
            "--format",
            "json",
            cwd=tmp_path,
        )
        assert fidelity.returncode == 0, fidelity.stderr
        recalls[candidate] = json.loads(fidelity.stdout)["overall"]["overlap@10"]["mean"]
    # HNSW is approximate, and a wider candidate list finds more of the true ten.
    assert 0.5 < recalls["pg-ef10"] < recalls["pg-hnsw"] <= 1.0
    assert recalls["pg-ef10"] < 1.0


@pytest.mark.parametrize(
    ("options", "exit_code", "says"),
    [
        ({"table": "no_such_table"}, 2, "has no table no_such_table"),
        (
            {"embedder_options": {"dimensions": 128}},
            2,
            "holds vectors of wordllama/l2_supercat_256",
        ),
        ({"search": "fuzzy"}, 2, "field 'search': must be 'hnsw' or 'exact'"),
        ({"ef_search": 0}, 2, "field 'ef_search': must be a whole number from 1 to 1000"),
        ({"password": "hunter2"}, 2, "secrets are not accepted"),
        (
            {"url": "postgresql://retrievalkit@127.0.0.1:9/retrievalkit"},
            3,
            "cannot reach PostgreSQL",
        ),
    ],
)
def test_configuration_errors_name_the_option_with_their_exit_code(
    pg_url: str, scifact_table: str, options: dict[str, Any], exit_code: int, says: str
) -> None:
    from retrievalkit_postgres.retriever import create_pgvector

    from retrievalkit.errors import RetrievalkitError

    settings = {"url": pg_url, "table": scifact_table, "embedder": "wordllama", **options}
    with pytest.raises(RetrievalkitError) as raised:
        create_pgvector(**settings)
    assert raised.value.exit_code == exit_code
    assert says in str(raised.value) and "hunter2" not in str(raised.value)


def test_an_unreachable_server_is_one_line_and_exit_3_on_the_command_line(
    pg_url: str, scifact_table: str, tmp_path: Path
) -> None:
    write_config(
        tmp_path,
        pg_url,
        scifact_table,
        broken={"url": "postgresql://retrievalkit@127.0.0.1:9/retrievalkit"},
    )
    done = cli("eval", "--set", "demo", "--retriever", "broken", "--no-save", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1
    assert "cannot reach PostgreSQL at 127.0.0.1:9/retrievalkit: Connection refused" in done.stderr


def test_pg_index_refuses_an_existing_table_and_bad_parameters(
    pg_url: str, scifact_table: str, tmp_path: Path
) -> None:
    demo = Path(__file__).resolve().parents[3] / "retrievalkit" / "demo" / "corpus.jsonl"
    common = ["pg", "index", "--corpus", str(demo), "--url", pg_url, "--embedder", "wordllama"]
    existing = cli(*common, "--table", scifact_table)
    assert (
        existing.returncode == 2
        and "already exists" in existing.stderr
        and "--recreate" in existing.stderr
    )
    small_ef = cli(*common, "--table", "t_unused", "--m", "32", "--ef-construction", "40")
    assert small_ef.returncode == 2 and "ef_construction >= 2 * m (64)" in small_ef.stderr
    with psycopg.connect(pg_url) as connection:
        count = connection.execute(f"SELECT count(*) FROM {scifact_table}").fetchone()[0]  # type: ignore[index]
        unused = connection.execute("SELECT to_regclass('t_unused')").fetchone()[0]  # type: ignore[index]
    assert count == 5183 and unused is None  # nothing replaced, nothing created


@pytest.mark.parametrize("search", ["exact", "hnsw"])
def test_the_retriever_keeps_retrievalkits_retriever_contract(
    pg_url: str, scifact_table: str, search: str
) -> None:
    from retrievalkit.testing import check_retriever

    retriever = check_retriever(
        "pgvector",
        probe_questions=["0-dimensional biomaterials show inductive properties."],
        approximate=search == "hnsw",
        url=pg_url,
        table=scifact_table,
        embedder="wordllama",
        search=search,
    )
    assert retriever.identifier == f"pgvector:{scifact_table}:{search}"
