"""Helpers the tests share: the CLI in a subprocess, config files, and trec_eval as oracle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
DEMO_CORPUS = REPO / "retrievalkit" / "demo" / "corpus.jsonl"
DEMO_SET = REPO / "retrievalkit" / "demo" / "golden.jsonl"


def shared_data() -> Path:
    """The read-only IR collections beside the repository (``../shared/data``)."""
    for candidate in (REPO.parent / "shared" / "data", REPO / "shared" / "data"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("../shared/data with the IR test collections is missing")


def cli(
    *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    """``python -m retrievalkit ARGS`` in a subprocess, as a user runs it."""
    environment = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def index_corpus(
    es_url: str, corpus: Path, index: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``retrievalkit es index`` for a test; fails the test with its output when it fails."""
    done = cli("es", "index", "--corpus", str(corpus), "--index", index, "--url", es_url, *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def toml_value(value: Any) -> str:
    """A TOML literal for strings, numbers, booleans, lists and tables (inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON string escapes are valid TOML basic-string escapes
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    raise TypeError(value)


def write_config(directory: Path, retrievers: Mapping[str, Mapping[str, Any]]) -> Path:
    """A retrievalkit.toml with ``[retrievers.NAME]`` blocks (plugin elasticsearch-bm25 unless
    an options table names another ``plugin``)."""
    lines: list[str] = []
    for name, options in retrievers.items():
        lines.append(f"[retrievers.{name}]")
        lines.append(f"plugin = {toml_value(options.get('plugin', 'elasticsearch-bm25'))}")
        lines += [
            f"{key} = {toml_value(value)}" for key, value in options.items() if key != "plugin"
        ]
        lines.append("")
    path = directory / "retrievalkit.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def evaluate(
    directory: Path,
    set_name: str,
    retriever: str,
    *extra: str,
    env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``retrievalkit eval`` through the CLI; the summary and the per-question lines."""
    out = directory / "out"
    done = cli(
        "eval",
        "--set",
        set_name,
        "--retriever",
        retriever,
        "--format",
        "json",
        "--output-dir",
        str(out),
        "--quiet",
        *extra,
        cwd=directory,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    lines = (out / "per_question.jsonl").read_text(encoding="utf-8").splitlines()
    return summary, [json.loads(line) for line in lines]


# --- trec_eval (pytrec_eval) as the oracle ------------------------------------------------

#: our metric family -> trec_eval measure
TREC_NAMES = {
    "hit": "success",
    "precision": "P",
    "recall": "recall",
    "ndcg": "ndcg_cut",
    "ap": "map_cut",
}


def trec_eval(
    rankings: Mapping[str, Sequence[str]],
    judgments: Mapping[str, Mapping[str, int]],
    ks: Sequence[int],
) -> dict[str, dict[str, float]]:
    """trec_eval's per-query values for these rankings (scores descend with rank)."""
    import pytrec_eval

    cut = ",".join(str(k) for k in ks)
    measures = {f"{name}.{cut}" for name in TREC_NAMES.values()} | {"recip_rank"}
    evaluator = pytrec_eval.RelevanceEvaluator(
        {qid: dict(labels) for qid, labels in judgments.items()}, measures
    )
    run = {
        qid: {doc: float(len(ranking) - rank) for rank, doc in enumerate(ranking)}
        for qid, ranking in rankings.items()
        if ranking
    }
    result: dict[str, dict[str, float]] = evaluator.evaluate(run)
    return result


def assert_matches_trec_eval(per_question: Sequence[Mapping[str, Any]], ks: Sequence[int]) -> int:
    """Every metric of every answerable question equals trec_eval's on the same ranking.

    Returns how many questions were compared. Questions without a relevant document
    must report undefined (None) values: trec_eval has no definition to compare with.
    """
    import pytest

    rankings = {line["question_id"]: line["ranking"] for line in per_question}
    judgments = {line["question_id"]: line["judgments"] for line in per_question}
    reference = trec_eval(rankings, judgments, ks)
    compared = 0
    for line in per_question:
        qid, scores = line["question_id"], line["scores"]
        if not any(grade >= 1 for grade in line["judgments"].values()):
            assert scores["rr"] is None and scores[f"ndcg@{max(ks)}"] is None, qid
            continue
        expected = reference.get(qid, {})
        for k in ks:
            for family, measure in TREC_NAMES.items():
                value = expected.get(f"{measure}_{k}", 0.0)  # no ranking: trec_eval's zero
                assert scores[f"{family}@{k}"] == pytest.approx(value, abs=1e-12), (
                    f"{family}@{k} of {qid}"
                )
        assert scores["rr"] == pytest.approx(expected.get("recip_rank", 0.0), abs=1e-12), qid
        compared += 1
    return compared


def mean_of(per_question: Sequence[Mapping[str, Any]], metric: str) -> float:
    values = [line["scores"][metric] for line in per_question if line["scores"][metric] is not None]
    return float(sum(values)) / len(values)
