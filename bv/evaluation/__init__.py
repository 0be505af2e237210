"""Runs of several stages into one folder: `bv eval` (prompt → rollout → judge → report)."""
