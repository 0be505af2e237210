"""`bv optimize`: improve a skill in a loop of rollout, reflection, edits and a paired gate
(docs/optimize.md). Above bv/stages and bv/reporting, below bv.api and bv/cli."""
