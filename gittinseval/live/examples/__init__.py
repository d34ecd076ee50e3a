"""Bundled example data and tasks of the live runs (JSON-lines datasets, a prices file, an inspect_ai task)."""
