"""The summary ``retrievalkit pool`` prints: how many pairs, per question, from which runs."""

from __future__ import annotations

from retrievalkit.pipeline.authoring.pool import Pool

#: Questions named one by one in the summary; the rest are counted.
SHOWN_QUESTIONS = 10


def pool_summary(pool: Pool, output: str) -> list[str]:
    """The lines of the summary, for a pool written to ``output``."""
    cut = (
        f" (cut at --budget {pool.budget} of {pool.unjudged} unjudged)"
        if pool.budget is not None and pool.budget < pool.unjudged
        else ""
    )
    left = f"; {pool.no_answer} no-answer question(s) left out" if pool.no_answer else ""
    lines = [
        f"pool: {len(pool.pairs)} pairs to label{cut} from the top {pool.depth} of "
        f"{len(pool.runs)} runs of set {pool.set_name}, by {pool.priority} priority, "
        f"written to {output}",
        f"pool: {pool.questions} questions pooled; {pool.judged} pairs already judged{left}",
    ]
    counts = pool.per_question()
    if counts:
        shown = ", ".join(
            f"{question} {count}" for question, count in list(counts.items())[:SHOWN_QUESTIONS]
        )
        more = len(counts) - SHOWN_QUESTIONS
        lines.append(
            f"pool: per question (first in pool order): {shown}"
            + (f" and {more} more questions" if more > 0 else "")
        )
    only = pool.only_in()
    lines.append(
        "pool: from runs: "
        + ", ".join(
            f"{run} {count} ({only[run]} only there)" for run, count in pool.by_run().items()
        )
    )
    if pool.pairs and pool.priority != "depth" and pool.pairs[0].priority == 0.0:
        lines.append(
            "pool: every pair has priority 0: the runs rank these documents alike, so no "
            "label can change their difference"
        )
    return lines
