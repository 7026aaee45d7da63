"""The version of retrievalkit, apart so that no inner module needs to import the facade."""

__version__ = "0.1.0"
