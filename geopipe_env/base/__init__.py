"""Layer 1: the base every other layer stands on: units and constants, the catalogs of GPUs, models and datasets,
the flat tables' declarations, how kernels are compiled, and the process's caches."""
