"""Whole-file compilation: one entry kernel, with the kernels it calls, as one program.

Calls are flattened: each call's kernel body is compiled in place, its
parameters bound to the caller's arguments and its results written to
intermediate int8 tensors in DRAM, which later operators read back. A call
assigned directly to a result writes that result itself. An argument computed
by an expression is first materialised into an intermediate tensor. The
program's inputs and outputs are the entry kernel's; intermediates appear in
the tensor table too, so `vtasim --output` can inspect them.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import numpy as np

from vtacc.frontend import checked as ck
from vtacc.frontend.check_calls import unknown_kernel
from vtasim.timing.profile import Profile
from vtasm.config import VTAConfig
from vtasm.errors import CompileError

from .compiler import Compiled, Unit, compile_units


def pick_entry(checked: ck.CheckedFile, name: str | None) -> ck.Kernel:
    """The kernel named ``name``, else 'main', else the last kernel of the file."""
    names = [k.name for k in checked.kernels]
    if name is not None:
        if name not in names:
            raise unknown_kernel(checked.path, name, names)
        return checked.kernel(name)
    if "main" in names:
        return checked.kernel("main")
    if not checked.kernels:
        raise CompileError(f"{checked.path}: the file defines no kernel")
    return checked.kernels[-1]


class _Flattener:
    def __init__(self, checked: ck.CheckedFile):
        self.file = checked
        self.units: list[Unit] = []
        self.taken: set[str] = set()
        self.calls: dict[tuple, list[ck.TensorRef]] = {}
        self._readers: dict[int, Counter] = {}

    def readers(self, k: ck.Kernel) -> Counter:
        """How many expressions read each node of kernel ``k`` (a local is one node, read where it is used)."""
        if id(k) not in self._readers:
            counts: Counter = Counter()

            def read(node: ck.Node) -> None:  # one more reader of node; its own reads counted once
                counts[id(node)] += 1
                if counts[id(node)] > 1:
                    return
                for f in dataclasses.fields(node):
                    value = getattr(node, f.name)
                    for child in value if isinstance(value, tuple | list) else [value]:
                        if isinstance(child, ck.Node):
                            read(child)

            for a in k.assigns:
                read(a.value)
            self._readers[id(k)] = counts
        return self._readers[id(k)]

    def fresh(self, base: str) -> str:
        name, n = base, 2
        while name in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        return name

    def kernel(self, k: ck.Kernel, bindings: dict[int, ck.Node], targets: dict[int, ck.TensorDecl],
               depth: int) -> None:
        """Compile kernel ``k``'s assignments, params bound by ``bindings``, results renamed by ``targets``."""
        memo: dict[int, ck.Node] = {}
        for a in k.assigns:
            target = targets.get(id(a.target), a.target)
            value = a.value
            if isinstance(value, ck.Concat):
                self.concat(value, target, bindings, memo, k, depth)
                continue
            if isinstance(value, ck.Call) and depth < 64:
                callee = self.file.kernel(value.kernel)
                if len(callee.outputs) == 1:
                    args = [self.rewrite(x, bindings, memo, k, depth) for x in value.args]
                    self.call(callee, args, value, {id(callee.outputs[0]): target}, depth)
                    continue
            self.units.append(Unit(k, dataclasses.replace(a, target=target,
                                                          value=self.rewrite(value, bindings, memo, k, depth))))

    def concat(self, node: ck.Concat, target: ck.TensorDecl, bindings: dict[int, ck.Node], memo: dict[int, ck.Node],
               k: ck.Kernel, depth: int) -> None:
        """Each part of a concatenation written straight into its channel slice of ``target``.

        A part computed by a call writes its slice in place; a tensor that
        already exists (a call computed before for another reader too) is
        copied into its slice.
        """
        c0 = 0
        for part in node.parts:
            width = part.shape[1]
            piece = ck.TensorDecl(self.fresh(f"{target.name}_c{c0}"), ck.INT8, part.shape, "slice", part.span,
                                  slice_of=target, channel0=c0)
            in_place = False
            if isinstance(part, ck.Call) and len(self.file.kernel(part.kernel).outputs) == 1 and depth < 64:
                callee = self.file.kernel(part.kernel)
                args = [self.rewrite(x, bindings, memo, k, depth) for x in part.args]
                # a call another expression reads too is computed once, into a tensor of its own (a slice
                # cannot be read on its own), and copied
                in_place = _call_key(part, args) not in self.calls and self.readers(k)[id(part)] <= 1
                if in_place:
                    self.call(callee, args, part, {id(callee.outputs[0]): piece}, depth)
            if not in_place:
                self.units.append(Unit(k, ck.Assign(piece, self.rewrite(part, bindings, memo, k, depth), part.span)))
            c0 += width

    def call(self, callee: ck.Kernel, args: list[ck.Node], node: ck.Call, targets: dict[int, ck.TensorDecl],
             depth: int) -> list[ck.TensorRef]:
        refs = []
        for arg, param in zip(args, callee.inputs, strict=True):
            if isinstance(arg, ck.TensorRef):
                refs.append(arg)
                continue
            if param.dtype != ck.INT8:
                raise CompileError(f"argument for {param.name} is computed, but only int8 tensors can be passed "
                                   "through DRAM (VTA stores 8-bit values)", arg.span)
            decl = ck.TensorDecl(self.fresh(f"{callee.name}_{param.name}"), param.dtype, param.shape,
                                 "intermediate", arg.span)
            self.units.append(Unit(callee, ck.Assign(decl, arg, arg.span)))
            refs.append(ck.TensorRef(param.shape, param.dtype, arg.span, decl))
        outs = {}
        for o in callee.outputs:
            decl = targets.get(id(o)) or ck.TensorDecl(self.fresh(f"{callee.name}_{o.name}"), o.dtype, o.shape,
                                                       "intermediate", node.span)
            outs[id(o)] = decl
        bindings = {id(p): r for p, r in zip(callee.inputs, refs, strict=True)}
        self.kernel(callee, bindings, outs, depth + 1)
        return [ck.TensorRef(o.shape, o.dtype, node.span, outs[id(o)]) for o in callee.outputs]

    def rewrite(self, node: ck.Node, bindings: dict[int, ck.Node], memo: dict[int, ck.Node], k: ck.Kernel,
                depth: int) -> ck.Node:
        key = id(node)
        if key in memo:
            return memo[key]
        if isinstance(node, ck.TensorRef):
            out = bindings.get(id(node.tensor), node)
        elif isinstance(node, ck.Concat):  # a concatenation read as a value: written into an intermediate
            decl = ck.TensorDecl(self.fresh(f"{k.name}_concat"), ck.INT8, node.shape, "intermediate", node.span)
            self.concat(node, decl, bindings, memo, k, depth)
            out = ck.TensorRef(node.shape, ck.INT8, node.span, decl)
        elif isinstance(node, ck.Call):
            callee = self.file.kernel(node.kernel)
            args = [self.rewrite(a, bindings, memo, k, depth) for a in node.args]
            call_key = _call_key(node, args)
            if call_key not in self.calls:
                self.calls[call_key] = (self.call(callee, args, node, {}, depth), args)  # args kept alive
            out = self.calls[call_key][0][node.result_index]
        else:
            changes = {}
            for f in dataclasses.fields(node):
                value = getattr(node, f.name)
                if isinstance(value, ck.Node):
                    changes[f.name] = self.rewrite(value, bindings, memo, k, depth)
            out = dataclasses.replace(node, **changes) if changes else node
        memo[key] = out
        return out


def _call_key(node: ck.Call, args: list[ck.Node]) -> tuple:
    """What identifies a call's results: kernels are pure, so the same kernel on the same tensors gives the
    same results."""
    return node.kernel, tuple(("tensor", id(a.tensor)) if isinstance(a, ck.TensorRef) else ("node", id(a))
                              for a in args)


def compile_file(checked: ck.CheckedFile, cfg: VTAConfig, kernel_name: str | None = None,
                 profile: Profile | None = None, threads: int | None = None,
                 params: dict[str, np.ndarray] | None = None, jobs: int | None = None) -> Compiled:
    """Compile the entry kernel of a checked file (with everything it calls) into one program.

    Tiles are chosen by the cycles predicted under ``profile`` (default: timing.names.DEFAULT);
    ``threads`` sets the virtual threads where a schedule does not. ``params``
    gives some of the entry's inputs their values (weights): they are packed
    into the program's data and are no longer inputs of the run. ``jobs``: the
    most processes the tiling searches may use (vtacc.forked; None: the cores).
    """
    entry = pick_entry(checked, kernel_name)
    unknown = sorted(set(params or {}) - {d.name for d in entry.inputs})
    if unknown:
        raise CompileError(f"the weights given ({', '.join(unknown)}) are not inputs of kernel '{entry.name}' "
                           f"(its inputs: {', '.join(d.name for d in entry.inputs)})", entry.span)
    flat = _Flattener(checked)
    flat.taken |= {d.name for d in entry.inputs + entry.outputs}
    flat.kernel(entry, {}, {}, 0)
    return compile_units(entry, flat.units, cfg, Path(checked.path).name, profile, threads, params, jobs)
