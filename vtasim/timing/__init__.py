"""A cycle-level timing model of VTA, separate from the functional simulation.

``profile`` reads hardware profiles (the costs, as data), ``plan`` turns each
instruction into the work it asks of the hardware, ``engine`` runs the
discrete-event model of the fetch, load, compute and store modules and the
memory engine, and ``report`` sums the result up. Timing depends on the
instructions only, never on data, so the model runs with or without the
functional simulator. It imports vtasm's ISA modules, nothing else of vtasim.
"""
