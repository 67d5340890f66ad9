"""Layer 3: pure physics functions (pipeline timing, schedule simulation, bandwidth sharing, energy)."""
