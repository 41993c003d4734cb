"""vtasim: a fast functional simulator of VTA programs, bit-exact with the reference."""
