"""The method: the evaluation protocol every policy shares, the finite-benchmark posterior,
priors, costs, the FFT root schedule (:mod:`~gittinseval.core.roots`) and the Gittins policy."""
