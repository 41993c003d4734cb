"""The names of the built-in hardware profiles and the default one.

profile.py loads them; the command line lists them in its help without
loading profile.py, which a run without timing never needs.
"""

BUILTIN = ("chisel-2019", "chisel-2021", "hls")
DEFAULT = "chisel-2019"
