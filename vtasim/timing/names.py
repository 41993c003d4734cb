"""The names of the built-in hardware profiles and the default one.

profile.py loads them; the command line lists them in its help without
loading profile.py, which a run without timing never needs.
"""

from vtasm.designs import CHISEL_2019, CHISEL_2021, DESIGNS, HLS

BUILTIN = DESIGNS  # one profile per measured design, named as isa.md section 7 names them
# The default is the design most users' boards run: the HLS design of the Pynq, Ultra96 and ZCU104
# bitstreams (the Chisel designs ran on the DE10-Nano and in simulation). docs/timing.md says more.
DEFAULT = HLS
# the read clients of the memory engine: the fetch unit and the memory types it loads (profiles order them)
CLIENTS = ("fetch", "uop", "inp", "wgt", "acc")
# the file of each design's RTL cycle counts in a measured program's directory (../shared/timing)
MEASURED = {CHISEL_2019: "cycles.json", CHISEL_2021: "cycles-2021.json", HLS: "cycles-hls.json"}
