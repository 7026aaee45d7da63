"""Scoring engine: retrievalkit against pytrec_eval and ranx on the same synthetic rankings.

Every tool gets the same seeded judgments and depth-100 rankings, in its own input
form built before the clock starts (retrievalkit: ranked id lists and grade maps;
pytrec_eval and ranx: their qrels and run dicts). Timed: from those inputs in memory
to the per-question metric table and its means. Each measurement is a fresh process;
"cold" is its first call, "warm" the second call in the same process, imports are
timed apart. Per-question values must agree to 1e-9 before any time is compared.

    python benchmarks/bench_scoring.py [--sizes 10000,100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from harness import EXIT_SKIPPED, emit, goal, load_now, ratio, run_worker, seconds, table, target
from synthetic import synthetic_run

DEPTH = 100
METRICS = ("hit@1", "hit@3", "hit@10", "recall@10", "precision@10", "rr", "ndcg@10", "ap@100")
TREC_EVAL = {
    "hit@1": "success_1",
    "hit@3": "success_3",
    "hit@10": "success_10",
    "recall@10": "recall_10",
    "precision@10": "P_10",
    "rr": "recip_rank",
    "ndcg@10": "ndcg_cut_10",
    "ap@100": "map_cut_100",
}
TREC_MEASURES = {"success.1,3,10", "recall.10", "P.10", "recip_rank", "ndcg_cut.10", "map_cut.100"}
RANX = {
    "hit@1": "hit_rate@1",
    "hit@3": "hit_rate@3",
    "hit@10": "hit_rate@10",
    "recall@10": "recall@10",
    "precision@10": "precision@10",
    "rr": "mrr",
    "ndcg@10": "ndcg@10",
    "ap@100": "map@100",
}
TOOLS = ("retrievalkit", "pytrec_eval", "ranx")
TOLERANCE = 1e-9


def _as_run(qids: list[str], rankings: list[list[str]]) -> dict[str, dict[str, float]]:
    # Descending distinct scores: both peers rank by score, so they see our exact order.
    return {
        qid: {doc: float(DEPTH - rank) for rank, doc in enumerate(ranking)}
        for qid, ranking in zip(qids, rankings, strict=True)
    }


def worker(tool: str, questions: int, out: Path) -> None:
    qids, rankings, judgments = synthetic_run(questions, DEPTH)
    began = time.perf_counter()
    if tool == "retrievalkit":
        from retrievalkit.metrics.definitions import compute_metrics, judge_rankings

        imported = time.perf_counter() - began

        def score() -> dict[str, Any]:
            judged = judge_rankings(rankings, judgments, depth=DEPTH)
            values = compute_metrics(judged, (1, 3, 10, DEPTH))
            table = {name: values[name] for name in METRICS}
            return {"values": table, "means": {n: float(np.nanmean(v)) for n, v in table.items()}}

    elif tool == "pytrec_eval":
        import pytrec_eval

        imported = time.perf_counter() - began
        qrels = dict(zip(qids, judgments, strict=True))
        run = _as_run(qids, rankings)

        def score() -> dict[str, Any]:
            evaluator = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES)
            per_question = evaluator.evaluate(run)
            table = {
                name: np.array([per_question[qid][measure] for qid in qids])
                for name, measure in TREC_EVAL.items()
            }
            return {"values": table, "means": {n: float(v.mean()) for n, v in table.items()}}

    else:
        from ranx import Qrels, Run, evaluate

        imported = time.perf_counter() - began
        qrels_dict = dict(zip(qids, judgments, strict=True))
        run_dict = _as_run(qids, rankings)

        def score() -> dict[str, Any]:
            run = Run(run_dict)
            means = evaluate(Qrels(qrels_dict), run, list(RANX.values()))
            table = {
                name: np.array([run.scores[metric][qid] for qid in qids])
                for name, metric in RANX.items()
            }
            return {"values": table, "means": {n: float(means[RANX[n]]) for n in table}}

    began = time.perf_counter()
    result = score()
    cold = time.perf_counter() - began
    began = time.perf_counter()
    score()
    warm = time.perf_counter() - began
    np.savez(out, **result["values"])
    emit({"import": imported, "cold": cold, "warm": warm, "means": result["means"]})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tool", choices=TOOLS)
    parser.add_argument("--questions", type=int)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.worker:
        worker(args.tool, args.questions, args.out)
        return 0
    missing = [peer for peer in ("pytrec_eval", "ranx") if importlib.util.find_spec(peer) is None]
    if missing:
        print(f"{', '.join(missing)} not installed (pip install -r benchmarks/requirements.txt)")
        return EXIT_SKIPPED

    print(f"## Scoring engine: {', '.join(METRICS)} at depth {DEPTH}")
    print("best of", args.repeats, "fresh processes per tool; times exclude imports\n")
    rows = []
    goals = []
    mismatches = []
    with tempfile.TemporaryDirectory() as scratch:
        for questions in (int(size) for size in args.sizes.split(",")):
            best: dict[str, dict[str, float]] = {}
            values: dict[str, Any] = {}
            # Tools take turns within each repeat, so a noisy spell hits all of them.
            for repeat in range(args.repeats):
                for tool in TOOLS:
                    out = Path(scratch) / f"{tool}-{questions}-{repeat}.npz"
                    answer = run_worker(
                        __file__,
                        ["--tool", tool, "--questions", str(questions), "--out", str(out)],
                    )
                    values[tool] = np.load(out)
                    kept = best.setdefault(tool, dict(answer))
                    for key in ("import", "cold", "warm"):
                        kept[key] = min(kept[key], answer[key])
            for tool in TOOLS[1:]:
                for name in METRICS:
                    gap = np.max(np.abs(values["retrievalkit"][name] - values[tool][name]))
                    if not gap <= TOLERANCE:
                        mismatches.append(
                            f"{questions} questions: {name} differs from {tool} by {gap:.3g}"
                        )
            ours = best["retrievalkit"]
            for tool in TOOLS:
                entry = best[tool]
                rows.append(
                    (
                        f"{questions:,} x {DEPTH}",
                        tool,
                        seconds(entry["import"]),
                        seconds(entry["cold"]),
                        seconds(entry["warm"]),
                        ratio(ours["cold"] / entry["cold"]),
                        ratio(ours["warm"] / entry["warm"]),
                    )
                )
            versus_trec = ours["cold"] / best["pytrec_eval"]["cold"]
            versus_ranx = ours["cold"] / best["ranx"]["cold"]
            goals.append(
                goal(
                    versus_trec <= 1.0,
                    f"scoring {questions:,} questions at or below 1.0x pytrec_eval: "
                    f"{ratio(versus_trec)}",
                )
            )
            goals.append(
                goal(
                    versus_ranx < 0.1,
                    f"scoring {questions:,} questions under 0.1x ranx cold: {ratio(versus_ranx)}",
                )
            )
            if questions == 100_000:
                goals.append(
                    target(
                        "scoring",
                        versus_trec <= 0.2,
                        f"{ratio(versus_trec)} ({seconds(ours['cold'])} against "
                        f"{seconds(best['pytrec_eval']['cold'])}, best of {args.repeats}; "
                        f"{load_now()})",
                    )
                )
    header = ("size", "tool", "import", "cold", "warm", "rk/tool cold", "rk/tool warm")
    print(table(header, rows))
    print()
    if mismatches:
        print("values DISAGREE, times not comparable:")
        print("\n".join(f"  {line}" for line in mismatches))
        return 1
    print(f"values: every per-question value agrees within {TOLERANCE:g} across the three tools")
    if not any("[scoring]" in line for line in goals):
        goals.append(target("scoring", False, f"not measured: sizes {args.sizes}, not 100000"))
    print("\n".join(goals))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
