"""retrievalkit on Qdrant: the ``qdrant`` retriever and ``retrievalkit qdrant index``, each
registered through an entry point.

Nothing here is imported by retrievalkit until a configuration or a command names it, so
installing this package costs the core nothing at start-up.
"""

from __future__ import annotations

__version__ = "0.1.0"
