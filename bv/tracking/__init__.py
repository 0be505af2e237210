"""Experiment trackers (MLflow, Weights & Biases): what `bv eval` and `bv optimize` send them.

An optional extra: the tracker's package is imported only when `--track` names it, and a
tracker that is down or refuses costs one warning on stderr, never the run (docs/tracking.md).
"""
