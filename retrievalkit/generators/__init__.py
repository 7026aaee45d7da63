"""Built-in question generators: ``offline`` (no model) and ``openai-compatible``."""
