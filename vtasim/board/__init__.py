"""Running programs and network files on VTA hardware: an FPGA board reached through the pynq API.

The device layer (device.py) loads a program into physically contiguous memory (relocate.py), starts it
with its design's control protocol (protocols.py, register maps in registers.py) and reads the results back.
It reaches the hardware only through a module that provides the pynq API (platform.py): ``pynq`` on the
board itself, PYNQ.remote from a workstation, or the emulated board this package ships (emulated/).
Nothing here imports the pynq package or the compiler at module import.
"""
