"""Simulated evaluation on response matrices: the simulator, one run from a Hydra config,
the results store of finished runs, loggers and the launchers' checks."""
