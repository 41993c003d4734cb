"""The host CPU's part of a network: operators VTA cannot compute, run in float32 between VTA launches.

As VTA's own runtime did, a host step dequantises its int8 inputs, computes
in float32 and requantises its outputs (``quant``); the operators' numerics
are defined once here (``ops``) and read by both the simulator and the
compiler's numpy reference of a quantised network.
"""
