"""The characters no label or name may hold, and a terminal must never be sent raw.

Golden-set readers refuse them in ids and labels; `retrievalkit.render.terminal` escapes
them in whatever it prints. One pattern, so what a reader refuses and what a printer
escapes never drift apart.
"""

from __future__ import annotations

import re

#: What a terminal may act on or hide: C0 and C1 controls, DEL, line and paragraph
#: separators, bidirectional marks, embeddings, overrides and isolates, invisible
#: spaces and lone surrogates. (Zero-width joiners stay: scripts such as Persian need them.)
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200b\u200e\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)
