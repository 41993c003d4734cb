"""vtacc: the kernel language and its compiler for VTA.

The passes live in three folders that import one way: ``frontend`` (source
text to the checked program) <- ``schedule`` (checked operators to the tiled
schedule) <- ``backend`` (schedule to instructions, micro-ops and tokens).
The modules here are the driver on top of them: ``compiler`` strings the
passes together, ``program_builder`` flattens kernel calls, ``explain`` and
``emit`` report on a compilation, ``cli`` is the ``vtacc`` command. vtacc
may import vtasm (and vtasim); neither imports vtacc.
"""
