"""retrievalkit-haystack: measure a Haystack pipeline or retriever component with retrievalkit.

``plugin = "haystack"`` with ``factory = "my_rag.pipelines:build"`` evaluates whatever the
team's own function builds: a ``haystack.Pipeline`` (the documents of ``output``, e.g.
``joiner.documents``, are its answer, and every component's documents are its stages) or
a single retriever component (its ``run(query=...)``). Components in
`retrievalkit_haystack.embedders` put any retrievalkit embedder inside a pipeline.
Haystack's telemetry is turned off (``HAYSTACK_TELEMETRY_ENABLED=False``) unless the
environment says otherwise.
"""

import os

# Haystack sends usage telemetry over the network unless told not to; an evaluation must
# not reach out. Set before any pipeline module imports haystack (a team's own choice in
# the environment wins).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from retrievalkit_haystack.retriever import HaystackRetriever, create_haystack

__all__ = ["HaystackRetriever", "create_haystack"]
