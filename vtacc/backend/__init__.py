"""From the tiled schedule to a vtasm program.

``codegen`` turns steps into instructions, micro-op tables and the DRAM
image; ``tokens`` adds the dependency flags that order the three stages.
It may import ``vtacc.schedule``, ``vtacc.frontend``, vtasm and vtasim,
never the driver modules of ``vtacc``.
"""
