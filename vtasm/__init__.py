"""vtasm: the VTA instruction set, assembler, disassembler and binary formats.

The modules here are the ISA, declared once as data, and what every tool
shares: the configuration (``config``), the instruction tables (``isa``),
the encoder and decoder (``encoding``), the in-memory program (``program``),
errors and file output (``errors``, ``fileio``). ``asm`` holds the assembly
language and ``formats`` the binary and text formats; both may import the
ISA modules, neither imports the other's internals nor the command line
(``cli``, ``cli_support``) that sits on top. vtasm imports neither vtasim
nor vtacc.
"""

__version__ = "0.1.0"
