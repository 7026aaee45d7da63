"""Haystack's telemetry off before anything imports haystack: the tests never reach out."""

import os

os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"
