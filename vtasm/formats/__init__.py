"""The binary and text formats programs are stored and shown in.

``vbin`` is the .vbin container (with its META chunk in ``meta`` and JSON
field checks in ``jsonfields``), ``raw`` the raw interchange directory, and
``dump`` the VTA runtime's debug listing. It may import the ISA modules of
vtasm, not ``vtasm.asm`` or the command line.
"""
