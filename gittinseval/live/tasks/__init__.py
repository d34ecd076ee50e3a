"""Adapters that turn a task into scores and dollars: chat and matrix scorers, graders,
prompt templates, price tables and inspect_ai tasks.  They import only the live engine's
task and failure types."""
