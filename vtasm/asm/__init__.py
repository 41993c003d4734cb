"""The assembly language: text to program and back.

``grammar.lark`` and ``parse`` read the text into statements (``ast``);
``expr`` evaluates symbols and expressions, ``layout`` places data segments,
``operands`` and ``syntax`` map operands to instruction fields, and
``assembler`` puts them together; ``disassembler`` prints canonical text that
assembles back to the same bytes. It may import the ISA modules of vtasm
(``config``, ``isa``, ``encoding``, ``program``, ``errors``, ``fileio``),
not ``vtasm.formats`` or the command line.
"""
