"""The in-order run's plain instructions in C, where a C compiler is at hand (pure Python otherwise).

A program that runs in program order (order.py) spends most of its run, on
pooling or element-wise work, calling numpy once or twice per instruction:
1.5-2.5 us each, where the reference simulator takes well under one.
``native_inorder.c`` runs the plain cases (loads and stores the in-order path
classified as plain, GEMM resets, GEMMs whose weight tiles are +-identity,
as vtacc moves int8 data into the accumulator, ALU instructions) without the interpreter,
each micro-op execution in order as the reference does; it stops at anything
else (a GEMM by real weights, which BLAS does better, a micro-op load, an unusual DMA, an index
outside its buffer, an unknown ALU opcode) and inorder.py runs that
instruction through its Python code, then hands back. Results are the same
bits either way (tests/vtasim/test_native.py runs both on the conformance
programs, the yardsticks and random programs).

The library is compiled once per machine from the package's C source with
the system's C compiler (``$CC``, else ``cc``) into the user's private cache
directory (vtasm.cache.private_cache_dir), named by a hash of the
source and flags, and loaded with ctypes. Nothing is downloaded. Where there
is no compiler, no writable cache, a configuration the C code does not take
(accumulator lanes other than 32 bits, stored lanes other than 8) or
``VTASIM_NATIVE=0`` in the environment, the run is the pure-Python one.
"""

from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

import numpy as np

from vtasm.cache import private_cache_dir

SOURCE = Path(__file__).with_name("native_inorder.c")


# how a DMA row of the in-order table (inorder.py _load_entries, _store_entries) is moved: declared here, where
# the C loop's codes are made, and read by inorder.py
UNIT, CONTIGUOUS, ROWS, PADDED = range(4)

# The in-order table's rows after the opcode: a LOAD's and a STORE's DMA entry (inorder.py makes them), and a
# GEMM's or ALU's fields in the ISA's order. The C loop reads each value by the name -DROW_<KIND>_<FIELD>
# gives its place.
LOAD_ROW = ("how", "mem_type", "start", "end", "base", "rows", "row_bytes", "step", "tile_rows", "tile_row_bytes",
            "pad_row", "pad_byte")  # byte offsets in the buffer and DRAM; the padded tile's shape and first pixel
STORE_ROW = ("how", "start", "end", "base", "rows", "row_bytes", "step")  # start, end: accumulator rows


def operands(kind: str) -> tuple[str, ...]:
    """The fields of an instruction kind after the opcode and dependency flags, in the ISA's order."""
    from vtasm import isa

    return tuple(f.name for f in isa.KINDS[kind].fields[len(isa.HEAD):])


def row_layouts() -> dict[str, tuple[str, ...]]:
    """Each row kind's fields after the opcode (value k + 1 of the row is field k)."""
    return {"load": LOAD_ROW, "store": STORE_ROW, "gemm": operands("gemm"), "alu": operands("alu")}


def _codes() -> tuple[str, ...]:
    """The -D flags that give the C source its codes, from the ISA tables and the in-order rows' kinds and
    layouts."""
    from vtasim.core.alu import SHIFT_MASK
    from vtasm import isa

    codes = {**{f"VTA_OP_{k.upper()}": isa.OPCODES[k] for k in ("load", "store", "gemm", "alu")},
             **{f"VTA_MEM_{k.upper()}": isa.MEM_TYPES[k] for k in ("wgt", "inp", "acc")},
             **{f"VTA_ALU_{k.upper()}": isa.ALU_OPS[k] for k in ("min", "max", "add", "shr", "mul")},
             "VTA_SHIFT_MASK": SHIFT_MASK,
             "VTA_HOW_UNIT": UNIT, "VTA_HOW_CONTIGUOUS": CONTIGUOUS, "VTA_HOW_ROWS": ROWS, "VTA_HOW_PADDED": PADDED,
             **{f"ROW_{kind.upper()}_{name.upper()}": k + 1 for kind, names in row_layouts().items()
                for k, name in enumerate(names)}}
    return tuple(f"-D{name}={value}" for name, value in sorted(codes.items()))


# SSE4.1 (every x86-64 processor since 2008) has the packed 32-bit min and max the ALU's lanes need
FLAGS = ("-O3", "-shared", "-fPIC", "-std=c99") + (
    ("-msse4.1",) if hasattr(os, "uname") and os.uname().machine in ("x86_64", "amd64") else ())
_MISSING = object()
_loaded: object = _MISSING  # the library once looked for: a CDLL, or None


_FIELDS = (("table", "p"), ("width", "i"), ("dram", "p"), ("inp", "p"), ("wgt", "p"), ("acc", "p"),
           ("acc_depth", "i"), ("lanes", "i"), ("uop_dst", "p"), ("uop_src", "p"), ("uop_wgt", "p"),
           ("uop_depth", "i"), ("inp_loads", "i"), ("wgt_loads", "i"), ("batch", "i"), ("block", "i"),
           ("inp_depth", "i"), ("wgt_depth", "i"))  # native_inorder.c's struct vta_ctx: pointers and int64


def _context_type(ctypes):
    """native_inorder.c's struct vta_ctx as a ctypes structure (ctypes is imported only for the loop)."""
    kinds = {"p": ctypes.c_void_p, "i": ctypes.c_int64}
    return type("Context", (ctypes.Structure,), {"_fields_": [(name, kinds[k]) for name, k in _FIELDS]})


def enabled() -> bool:
    """Whether the environment allows the native loop (``VTASIM_NATIVE=0`` turns it off)."""
    return os.environ.get("VTASIM_NATIVE", "1").strip().lower() not in ("0", "off", "no", "false")


def library():
    """The compiled loop (built on first use), or None where it cannot be had (module docstring)."""
    global _loaded
    if not enabled():
        return None
    if _loaded is _MISSING:
        _loaded = _load() if sys.platform != "win32" and sys.byteorder == "little" else None
    return _loaded


def _load():
    cache = private_cache_dir()
    if cache is None:
        return None
    compiler = os.environ.get("CC") or "cc"
    source = SOURCE.read_bytes()
    flags = FLAGS + _codes()
    key = f"{zlib.crc32(source + repr((flags, compiler, sys.platform)).encode()):08x}{len(source):x}"
    path = cache / f"vtasim-inorder-{key}.so"
    if not path.exists() and not _build(compiler, path, flags):
        return None
    import ctypes

    try:
        lib = ctypes.CDLL(str(path))
    except OSError:
        return None
    lib.context_type = _context_type(ctypes)
    if layout_mismatch(lib, ctypes):
        return None
    lib.vta_run.argtypes = [ctypes.POINTER(lib.context_type), ctypes.c_int64, ctypes.c_int64]
    lib.vta_run.restype = ctypes.c_int64
    lib.byref = ctypes.byref
    return lib


def layout_mismatch(lib, ctypes) -> str | None:
    """What differs between the C struct vta_ctx (its size and field offsets, as the library reports them)
    and the ctypes mirror, or None when they agree."""
    found = (ctypes.c_int64 * (len(_FIELDS) + 1))()
    lib.vta_ctx_layout(found)
    mirror = [ctypes.sizeof(lib.context_type)] + [getattr(getattr(lib.context_type, name, None), "offset", -1)
                                                  for name, _ in _FIELDS]
    if list(found) == mirror:
        return None
    return f"struct vta_ctx: the library says size and offsets {list(found)}, native.py {mirror}"


def _build(compiler: str, path: Path, flags: tuple[str, ...]) -> bool:
    """Compile the C source to ``path`` (through a file of this process's own, renamed into place); a
    compiler without function multiversioning gets the loop compiled once, for the baseline."""
    failed = path.with_suffix(".failed")
    if failed.exists():  # tried on this machine with this compiler: not again in every process
        return False
    import subprocess

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        for extra in ((), ("-DVTA_NO_CLONES",)):
            done = subprocess.run([compiler, *flags, *extra, "-o", str(tmp), str(SOURCE)], capture_output=True,
                                  timeout=120, check=False)
            if done.returncode == 0:
                os.replace(tmp, path)
                return True
        failed.write_bytes(done.stderr[-4000:])
        return False
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        tmp.unlink(missing_ok=True)


class NativeRun:
    """The compiled loop bound to one machine state and program table."""

    def __init__(self, lib, state, table: np.ndarray):
        self.lib = lib
        self.state = state
        self.table = np.ascontiguousarray(table, dtype=np.int64)
        cfg = state.cfg
        self.keep = (state.dram, state.inp_bytes, state.wgt_bytes, state.acc_bytes, state.uop_dst, state.uop_src,
                     state.uop_wgt)  # what the context points into, alive as long as it is
        block = cfg.block_in if cfg.block_in == cfg.block_out and cfg.inp_width == cfg.wgt_width == 8 else 0
        self.ctx = lib.context_type(
            table=self.table.ctypes.data, width=self.table.shape[1], dram=state.dram.ctypes.data,
            inp=state.inp_bytes.ctypes.data, wgt=state.wgt_bytes.ctypes.data, acc=state.acc_bytes.ctypes.data,
            acc_depth=cfg.acc_depth, lanes=cfg.batch * cfg.block_out, uop_dst=state.uop_dst.ctypes.data,
            uop_src=state.uop_src.ctypes.data, uop_wgt=state.uop_wgt.ctypes.data, uop_depth=state.uop_dst.size,
            batch=cfg.batch, block=block, inp_depth=cfg.inp_depth, wgt_depth=cfg.wgt_depth)
        self.ref = lib.byref(self.ctx)

    def run(self, start: int, end: int) -> int:
        """Run instructions from ``start`` until one the C code leaves to Python (its index) or ``end``."""
        stop = self.lib.vta_run(self.ref, start, end)
        ctx = self.ctx
        if ctx.inp_loads:
            self.state.inp_generation += ctx.inp_loads
            ctx.inp_loads = 0
        if ctx.wgt_loads:
            self.state.wgt_generation += ctx.wgt_loads
            ctx.wgt_loads = 0
        return stop


def native_run(state, table: np.ndarray) -> NativeRun | None:
    """The compiled loop for this state and program (``table``: inorder.py's _table, a row of int64 per
    instruction), or None (no library, or a configuration it does not take: module docstring)."""
    cfg = state.cfg
    if cfg.acc_width != 32 or cfg.out_width != 8 or state.uop_dst.dtype != np.int64 \
            or state.uop_wgt.dtype != np.int64:
        return None
    buffers = (state.dram, state.inp_bytes, state.wgt_bytes, state.acc_bytes, state.uop_dst, state.uop_src,
               state.uop_wgt)
    if not all(a.flags.c_contiguous for a in buffers):
        return None
    lib = library()
    if lib is None:
        return None
    return NativeRun(lib, state, table)
