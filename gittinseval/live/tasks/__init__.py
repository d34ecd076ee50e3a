"""Adapters that turn a task into scores and dollars: chat and matrix scorers, graders,
prompt templates, price tables, inspect_ai tasks and scripted mockllm replies for them,
and the objects a task config names by import path.  They import only the live engine's
task and failure types."""
