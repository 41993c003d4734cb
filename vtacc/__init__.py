"""vtacc: the kernel language and its compiler for VTA."""
