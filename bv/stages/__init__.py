"""The pipeline's stages as plain runners over records: prompt, rollout, judge, merge.
Imports bv.core and bv.engine."""
