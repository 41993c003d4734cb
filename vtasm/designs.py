"""The measured VTA hardware designs (isa.md section 7), named as the timing profiles and the portability
rules name them: a module of its own so that naming them loads nothing else."""

CHISEL_2019, CHISEL_2021, HLS = "chisel-2019", "chisel-2021", "hls"
DESIGNS = (CHISEL_2019, CHISEL_2021, HLS)
