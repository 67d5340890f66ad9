"""Layer 4: the simulation: the core types, per-episode worlds, the event heap, the cluster simulator and its
compiled kernels, and the layout table."""
