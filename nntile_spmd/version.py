"""The library's version: below every layer, so the plan cache can key plans by it."""

__version__ = "0.1.0"
