"""Design-space exploration: sweep VTA variants over workloads (``vtacc explore``).

A spec (TOML) names workloads, a space of configurations, hardware profiles
and schedule settings; every combination is a point that is compiled and
timed by the timing model. Points run on Dask, results land in a table as
they finish, and a Pareto picture sums them up.

Modules: ``spec`` (reading a spec into points), ``layers`` (single-layer
workloads as kernel language), ``evaluate`` (one point -> one row),
``results`` (the table, its cache of finished points), ``sweep`` (running
points on a Dask cluster), ``pareto`` (fronts and pictures), ``cli``.
This room sits above the compiler driver: it may import the driver, the
frontend, ``vtasim.timing`` and ``vtasm``; nothing below imports it.
"""
