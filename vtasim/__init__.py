"""vtasim: a fast functional simulator of VTA programs, bit-exact with the reference."""

import os as _os

# The GEMM unit issues many small matrix products, for which BLAS threads cost
# more than they bring; a user's explicit setting still wins.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
