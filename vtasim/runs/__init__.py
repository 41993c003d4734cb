"""Runs as the tools perform them: one program with its inputs, checks and outputs; one loaded program
many times on arrays; a network file's VTA launches and host steps."""
