"""Questions saved by ``eval --sequential`` on the demo set and on SciFact.

For each set, a retriever named ``kb`` is evaluated once in full (the baseline). Then
``eval --sequential`` runs twice against that baseline: with ``kb`` unchanged (the gate
should pass) and with ``kb`` degraded (it should fail): on the demo, BM25 over titles
only; on SciFact, BM25 over the first 20 words of each document. Thresholds: hit@1 and
hit@3 may drop by 0.1 (the demo) or 0.05 (SciFact). Reported: the decision, the
questions asked, and the share of retrieval calls saved; the decision is checked
against the full-set verdict of the same two runs.

    python benchmarks/bench_sequential.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import REPO, goal, table
from populations import data_dir


def _cli(directory: Path, *args: str) -> dict[str, object]:
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args, "--format", "json", "-q"],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"retrievalkit {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _config(directory: Path, retriever: str, threshold: float) -> None:
    (directory / "retrievalkit.toml").write_text(
        f"{retriever}\n\n[regression]\nmax_top1_drop = {threshold}\nmax_top3_drop = {threshold}\n",
        encoding="utf-8",
    )


def scenario(
    name: str, set_arg: str, full: str, degraded: str, threshold: float
) -> list[tuple[str, ...]]:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        _config(directory, full, threshold)
        _cli(directory, "eval", "--set", set_arg, "--retriever", "kb")
        for label, retriever, expected in (
            ("unchanged", full, "pass"),
            ("degraded", degraded, "fail"),
        ):
            _config(directory, retriever, threshold)
            report = _cli(directory, "eval", "--set", set_arg, "--retriever", "kb", "--sequential")
            verdict = report["regression"]
            assert isinstance(verdict, dict)
            sequence = verdict["sequential"]
            full_run = _cli(directory, "eval", "--set", set_arg, "--retriever", "kb", "--no-save")
            full_verdict = full_run["regression"]
            assert isinstance(full_verdict, dict)
            agrees = (sequence["decision"] == "fail") == bool(full_verdict["regressed"])
            saved = sequence["total"] - sequence["asked"]
            rows.append(
                (
                    name,
                    label,
                    f"{threshold:g}",
                    sequence["decision"],
                    f"{sequence['asked']} of {sequence['total']}",
                    f"{saved} ({saved / sequence['total']:.0%})",
                    "yes" if agrees else "NO",
                    expected,
                )
            )
    return rows


def main() -> int:
    scifact = data_dir() / "scifact"
    demo_corpus = REPO / "retrievalkit" / "demo" / "corpus.jsonl"
    with tempfile.TemporaryDirectory() as folder:
        titles = Path(folder) / "titles.jsonl"
        with titles.open("w", encoding="utf-8") as handle:
            for line in demo_corpus.read_text(encoding="utf-8").splitlines():
                document = json.loads(line)
                document["text"] = ""
                handle.write(json.dumps(document) + "\n")
        rows = scenario(
            "demo (75)",
            "demo",
            '[retrievers.kb]\nplugin = "bm25-demo"',
            f'[retrievers.kb]\nplugin = "bm25"\ncorpus = "{titles}"\ndoc_id_separator = "#"',
            0.1,
        )
    corpus = scifact / "corpus.jsonl"
    rows += scenario(
        "SciFact (300)",
        str(scifact),
        f'[retrievers.kb]\nplugin = "bm25"\ncorpus = "{corpus}"',
        f'[retrievers.kb]\nplugin = "bm25"\ncorpus = "{corpus}"\nmax_doc_words = 20',
        0.05,
    )
    print("## eval --sequential: questions asked before the gate settled\n")
    header = ("set", "candidate", "allowed drop", "decision", "asked", "saved",
              "agrees with full run", "expected")  # fmt: skip
    print(table(header, [row for row in rows]))
    right = all(row[3] == row[7] and row[6] == "yes" for row in rows)
    print(goal(right, "every sequential decision is the expected one and agrees with the full run"))
    return 0 if right else 1


if __name__ == "__main__":
    raise SystemExit(main())
