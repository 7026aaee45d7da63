"""The embedder contract, the kit's embedder rules, and the built-in offline WordLlama embedder."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from child_env import child_pythonpath
from conftest import RunCli

from retrievalkit.embedders import create_embedder, embed_queries
from retrievalkit.errors import InputError, PluginError
from retrievalkit.testing import ContractViolation, check_embedder

#: Installed before anything else in a child process: any socket use raises.
NO_NETWORK = textwrap.dedent(
    """
    import socket

    def _refuse(*args, **kwargs):
        raise RuntimeError(f"network touched: {args!r}")

    socket.socket.connect = _refuse
    socket.socket.connect_ex = _refuse
    socket.create_connection = _refuse
    socket.getaddrinfo = _refuse
    """
)


def _python(code: str, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=env,
    )


# --- the built-in embedder ------------------------------------------------------------------


@pytest.mark.parametrize("dimensions", [256, 64])
def test_wordllama_keeps_the_embedder_contract(dimensions: int) -> None:
    embedder = check_embedder("wordllama", dimensions=dimensions)
    assert embedder.dimensions == dimensions
    assert embedder.similarity == "cosine"


def test_wordllama_model_id_names_the_truncation() -> None:
    full = create_embedder("wordllama")
    small = create_embedder("wordllama", {"dimensions": 128})
    assert full.model_id == "wordllama/l2_supercat_256"
    assert small.model_id != full.model_id
    # The truncated model is the leading part of the same vectors, scaled to unit length.
    text = ["Where can I print a document at the library?"]
    head = full.embed(text)[0, :128]
    np.testing.assert_allclose(small.embed(text)[0], head / np.linalg.norm(head), rtol=1e-5)


def test_wordllama_vectors_carry_meaning() -> None:
    embedder = create_embedder("wordllama")
    vectors = embedder.embed(
        [
            "borrowing books from the public library",
            "how to borrow a book at the library",
            "quarterly tax filing for corporations",
        ]
    )
    related, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert related > unrelated + 0.1


def test_wordllama_loads_and_embeds_without_touching_the_network(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    code = NO_NETWORK + textwrap.dedent(
        """
        import hashlib, logging
        from retrievalkit.embedders import create_embedder

        embedder = create_embedder("wordllama")
        matrix = embedder.embed(["renew a library card", "opening hours"])
        print(hashlib.sha256(matrix.tobytes()).hexdigest())
        print(len(logging.getLogger().handlers))
        """
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "HF_HUB_OFFLINE": "0"}
    done = _python(code, env=env)
    assert done.returncode == 0, done.stderr
    digest, handlers = done.stdout.split()
    assert len(digest) == 64
    # Importing wordllama configures the root logger; the embedder undoes it.
    assert handlers == "0"
    # Nothing was cached or downloaded under the home folder either (stevedore keeps its
    # entry-point cache there, which is not a model file).
    written = [path.relative_to(home).parts[:2] for path in home.rglob("*") if path.is_file()]
    assert {parts for parts in written if parts != (".cache", "python-entrypoints")} == set()


def test_embeddings_are_bit_identical_across_processes() -> None:
    code = textwrap.dedent(
        """
        import hashlib, json
        from retrievalkit.formats.corpus import read_corpus
        from retrievalkit.demo import DEMO_CORPUS
        from retrievalkit.embedders import create_embedder

        texts = [f"{d.title}\\n{d.text}" for d in read_corpus(DEMO_CORPUS)]
        embedder = create_embedder("wordllama")
        print(hashlib.sha256(embedder.embed(texts).tobytes()).hexdigest())
        print(hashlib.sha256(embedder.embed(texts[::-1])[::-1].tobytes()).hexdigest())
        """
    )
    first, second = _python(code), _python(code)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    forward, backward = first.stdout.split()
    assert forward == backward  # order of the texts in the call does not matter


def test_wordllama_rejects_a_size_it_does_not_have() -> None:
    with pytest.raises(InputError) as caught:
        create_embedder("wordllama", {"dimensions": 300})
    assert "dimensions" in str(caught.value)
    assert "64, 128, 256" in str(caught.value)


def test_unknown_embedder_and_unknown_option_are_named() -> None:
    with pytest.raises(InputError) as unknown:
        create_embedder("no-such-embedder")
    assert "no-such-embedder" in str(unknown.value)
    assert "wordllama" in str(unknown.value)  # what is installed
    with pytest.raises(InputError) as option:
        create_embedder("wordllama", {"colour": "blue"})
    assert "colour" in str(option.value)
    assert "embedder_options" in str(option.value)


def test_list_shows_embedders(cli: RunCli) -> None:
    done = cli("list", "--format", "json")
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    assert {"name": "wordllama", "provider": "retrievalkit-eval[wordllama]"} in listing["embedders"]


def test_start_up_imports_no_model_code() -> None:
    """`list` loads the embedder entry point but neither wordllama nor its tokenizer."""
    code = textwrap.dedent(
        """
        import contextlib, io, sys
        from retrievalkit.cli.main import main

        with contextlib.redirect_stdout(io.StringIO()):
            code = main(["list"])
        heavy = [m for m in ("wordllama", "tokenizers", "safetensors", "requests")
                 if m in sys.modules]
        print(code, heavy)
        """
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0 []"


def test_a_missing_dense_extra_says_what_to_install(tmp_path: Path, cli: RunCli) -> None:
    # A wordllama that cannot be imported, first on the path: as if the extra were missing.
    site = tmp_path / "site"
    (site / "wordllama").mkdir(parents=True)
    (site / "wordllama" / "__init__.py").write_text(
        "raise ImportError(\"No module named 'wordllama'\")\n", encoding="utf-8"
    )
    code = textwrap.dedent(
        """
        from retrievalkit.embedders import create_embedder
        from retrievalkit.errors import InputError
        try:
            create_embedder("wordllama")
        except InputError as error:
            print(error)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": child_pythonpath(site), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert "wordllama" in done.stdout
    assert "pip install 'retrievalkit-eval[dense]'" in done.stdout


# --- the contract kit's embedder rules --------------------------------------------------------


class _Embedder:
    """A configurable embedder that breaks one rule at a time."""

    model_id = "test/hashing"
    dimensions = 8
    similarity = "cosine"

    def __init__(self, **changes: Any) -> None:
        for name, value in changes.items():
            setattr(self, name, value)

    def _vector(self, text: str) -> np.ndarray:
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        raw = np.frombuffer(digest[: self.dimensions * 4], dtype=np.uint32)
        vector = (raw / 2**32 - 0.5).astype(np.float32)
        return vector / np.float32(np.linalg.norm(vector))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        matrix = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            matrix[row] = self._vector(text)
        return matrix


class _Float64(_Embedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return super().embed(texts).astype(np.float64)


class _Batched(_Embedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return super().embed(texts) + np.float32(len(texts) / 100)


class _Drifting(_Embedder):
    calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return super().embed(texts) * np.float32(1 + self.calls * 1e-7)


class _NaN(_Embedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        matrix = super().embed(texts)
        matrix[[not text for text in texts]] = np.nan
        return matrix


class _Constant(_Embedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), self.dimensions), dtype=np.float32)


class _WrongWidth(_Embedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return super().embed(texts)[:, :4]


class _Unnormalised(_Embedder):
    similarity = "dot_product"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return super().embed(texts) * np.float32(3)


class _BadQueries(_Embedder):
    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts).tolist()


def test_a_good_embedder_passes_the_kit() -> None:
    assert isinstance(check_embedder(_Embedder), _Embedder)
    assert check_embedder(_Embedder, similarity="dot_product").similarity == "dot_product"


@pytest.mark.parametrize(
    ("factory", "options", "rule"),
    [
        (_Embedder, {"model_id": ""}, "embedder.attributes"),
        (_Embedder, {"dimensions": True}, "embedder.attributes"),
        (_Embedder, {"similarity": "euclid"}, "embedder.attributes"),
        (_Float64, {}, "embedder.empty"),
        (_WrongWidth, {}, "embedder.empty"),
        (_NaN, {}, "embedder.finite"),
        (_Drifting, {}, "embedder.deterministic"),
        (_Batched, {}, "embedder.independent"),
        (_Unnormalised, {}, "embedder.unit"),
        (_Constant, {}, "embedder.distinct"),
        (_BadQueries, {}, "embedder.queries"),
    ],
)
def test_the_kit_names_each_broken_rule(
    factory: type[_Embedder], options: dict[str, Any], rule: str
) -> None:
    with pytest.raises(ContractViolation) as caught:
        check_embedder(factory, **options)
    assert caught.value.rule == rule


def test_the_kit_reports_a_factory_that_raises() -> None:
    def factory() -> _Embedder:
        raise RuntimeError("model file missing")

    with pytest.raises(ContractViolation) as caught:
        check_embedder(factory)
    assert caught.value.rule == "embedder.factory"
    assert "model file missing" in str(caught.value)


def test_embed_queries_prefers_the_query_side() -> None:
    class Asymmetric(_Embedder):
        def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
            return self.embed([f"query: {text}" for text in texts])

    embedder = Asymmetric()
    np.testing.assert_array_equal(embed_queries(embedder, ["a"]), embedder.embed(["query: a"]))
    np.testing.assert_array_equal(embed_queries(_Embedder(), ["a"]), _Embedder().embed(["a"]))


def test_an_embedder_plugin_without_a_model_id_is_a_plugin_error() -> None:
    from retrievalkit.embedders import check_embedder_attributes

    with pytest.raises(PluginError) as caught:
        check_embedder_attributes(_Embedder(model_id=None), "embedder 'x'")
    assert "model_id" in str(caught.value)
