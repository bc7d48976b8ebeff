"""The door: the one way the app and its pages reach the engine, each submodule by what a page asks.

The app imports `rag_core.loupe.*` and nothing else of `rag_core` (an import-linter contract in
pyproject.toml says so): the engine's own layout can change behind these names without a page
noticing. A submodule re-exports the engine's names a page uses, or wraps a step the page would
otherwise take inside the engine's objects.
"""
