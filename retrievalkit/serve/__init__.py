"""``retrievalkit serve``: a local web application over a result store (install ``[serve]``)."""
