"""Built-in relevance judges: ``openai-compatible``."""
