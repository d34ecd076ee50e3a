"""The command-line apps (thin Hydra apps) and their one-line errors."""
