"""Checks of a run: what each instruction touches, races between stages no token orders, and the lint of
what real VTA hardware would do differently."""
