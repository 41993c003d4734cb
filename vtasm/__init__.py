"""vtasm: the VTA instruction set, assembler, disassembler and binary formats."""

__version__ = "0.1.0"
