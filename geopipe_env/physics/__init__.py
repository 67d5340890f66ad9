"""Layer 2: pure physics functions: pipeline timing and memory, the schedules and their executor, bandwidth sharing,
energy, failures and job sizing."""
