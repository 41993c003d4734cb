"""Structure-aware, seeded fuzzing of the toolchain's contract for bad input (see contract.py)."""
