"""Renderers of one evaluation report: JSON (the public contract), Markdown and a rich table."""
