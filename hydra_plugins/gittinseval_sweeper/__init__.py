"""GittinsEval's Hydra sweeper (``hydra/sweeper=skip_finished``), found by Hydra's plugin discovery."""
