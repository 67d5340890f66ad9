"""Layer 5: the decision: placement strategies and their compiled twins, the candidate table, the observation and
the decision backends."""
