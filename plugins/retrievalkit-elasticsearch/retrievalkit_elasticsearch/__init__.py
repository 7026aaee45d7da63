"""retrievalkit on Elasticsearch: the ``elasticsearch-bm25`` retriever, ``retrievalkit es index``
and the ``elasticsearch://`` result store, each registered through an entry point.

Nothing here is imported by retrievalkit until a configuration, a command or a store URL
names it, so installing this package costs the core nothing at start-up.
"""

from __future__ import annotations

__version__ = "0.1.0"
