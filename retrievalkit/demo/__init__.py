"""The bundled demo: a small city library corpus and a golden set that uses every feature."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrievalkit.model.values import GoldenQuestionSet

DEMO_DIRECTORY = Path(__file__).parent
DEMO_CORPUS = DEMO_DIRECTORY / "corpus.jsonl"
DEMO_SET = DEMO_DIRECTORY / "golden.jsonl"


class DemoSetProvider:
    """Question-set provider of the built-in ``demo`` set."""

    def set_names(self) -> list[str]:
        return ["demo"]

    def load(self, name: str) -> GoldenQuestionSet:
        from retrievalkit.formats.golden_sets import load_jsonl
        from retrievalkit.model.values import GoldenQuestionSet

        if name != "demo":
            raise KeyError(name)
        loaded = load_jsonl(DEMO_SET, name="demo")
        return GoldenQuestionSet(
            name="demo",
            questions=loaded.questions,
            description="Questions about the services of a city public library (bundled demo).",
            source="retrievalkit.demo",
        )
