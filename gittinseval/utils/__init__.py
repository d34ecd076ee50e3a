"""The floor under everything: argument validation, the usage-error base class, torch threads."""
