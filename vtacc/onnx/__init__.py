"""ONNX models as the compiler's input: load, check, quantise for VTA, and write as kernel language.

``import_model`` runs the steps: the graph (graph.py), float layers for VTA
and for the host CPU (network.py), int8 layers with power-of-two scales
(quantise.py), the split into VTA launches and host steps (partition.py),
and the kernel-language text of each launch with its weights (emit.py).
reference.py executes the quantised network in numpy, bit for bit what VTA
and the host must produce.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vtasim.host.ops import OPS as HOST_OPS
from vtasm.errors import FormatError, ModelError
from vtasm.fileio import read_npy
from vtasm.formats.network import Side
from vtasm.names import kernel_identifier

from .accuracy import SAMPLES, measure
from .convert import LayerKind, Network, lower
from .correct import correct_biases
from .emit import emit_vk
from .kinds import layer_macs
from .partition import Part, idle_launches, partition
from .quantise import quantise
from .quantised import QuantisedNetwork, shown_scale
from .read.graph import load_graph
from .read.wire import release_all


@dataclass
class Imported:
    """An imported model: its quantised network, where each layer runs, and (when VTA computes it whole)
    its kernel-language text and the weights main takes."""

    qnet: QuantisedNetwork
    source: str
    params: dict[str, np.ndarray]
    parts: list[Part]

    @property
    def whole_on_vta(self) -> bool:
        return len(self.parts) == 1 and self.parts[0].kind == Side.VTA

    @property
    def input_name(self) -> str:
        """The program's input tensor (the model's input, named for the kernel language)."""
        return kernel_identifier(self.qnet.network.input)

    @property
    def output_name(self) -> str:
        return kernel_identifier(self.qnet.network.output)

    def report(self) -> str:
        """Each layer's scales and the calibration range, one line each."""
        q = self.qnet
        lines = [f"{q.network.name}: {len(q.layers)} layers; input '{q.network.input}' scale 2^{q.input_exp}, "
                 f"output '{q.network.output}' scale 2^{q.output_exp}"]
        for layer in q.layers:
            seen = q.ranges.get(layer.layer.output)
            weights = f", weights {layer.weight_scales()}" if layer.w_exps is not None else ""
            shift = "" if layer.kind not in (LayerKind.CONV, LayerKind.DENSE) else (
                f", shift {int(layer.shift)}" if np.ndim(layer.shift) == 0 else
                f", shifts {int(np.min(layer.shift))}..{int(np.max(layer.shift))}")
            rng = f", calibration range +-{seen:.4g}" if seen is not None else ""
            db = q.sqnr.get(layer.layer.output)
            rng += f", sqnr {db:.1f} dB" if db is not None and math.isfinite(db) else (
                ", exact" if db is not None else "")
            kind = str(layer.kind) if layer.kind != LayerKind.HOST else f"host {layer.layer.node.op}"
            why = f" ({layer.layer.reason})" if layer.kind == LayerKind.HOST else ""
            out = shown_scale(layer.out_mant, layer.out_exp)
            lines.append(f"  {layer.name:<16} {kind:<8} out {out}{weights}{shift}{rng}{why}")
        lines += [f"  note: {n}" for n in q.notes]
        lines += self.verdicts()
        lines.append(self.placement())
        return "\n".join(lines) + "\n"

    def verdicts(self) -> list[str]:
        """One line per model output: its SQNR against the float model and, for class scores, top-1
        agreement, measured on the first calibration inputs; and its values that clip, if any."""
        q = self.qnet
        lines = []
        for t in q.network.outputs:
            db = q.sqnr.get(t)
            if db is None:
                continue
            shown = "exact" if not math.isfinite(db) else f"SQNR {db:.1f} dB"
            text = f"  output '{t}': {shown} against the float model"
            if t in q.top1:
                agree, total = q.top1[t]
                text += f", top-1 the float model's on {agree} of {total} calibration inputs"
            if q.clipped.get(t):
                text += f"; {q.clipped[t]} value(s) beyond its int8 range clip"
            lines.append(text)
        return lines

    def placement(self) -> str:
        """One line: how many VTA launches and host steps, and which operators the host computes."""
        vta = sum(p.kind == Side.VTA for p in self.parts)
        host = [p for p in self.parts if p.kind == Side.HOST]
        on_vta = sum(layer_macs(q.layer) for p in self.parts if p.kind == Side.VTA for q in p.layers)
        on_host = sum(layer_macs(q.layer) for p in host for q in p.layers)
        macs = f"; MACs: VTA {on_vta:,}" + (f", host {on_host:,}" if host else "")
        if not host:
            return f"  runs on VTA whole: one launch of {len(self.parts[0].layers)} layers{macs}"
        ops: dict[str, int] = {}
        for p in host:
            for q in p.layers:
                ops[q.layer.node.op] = ops.get(q.layer.node.op, 0) + 1
        shown = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in ops.items())
        return (f"  runs in {vta} VTA launch{'es' if vta != 1 else ''} and {len(host)} host "
                f"step{'s' if len(host) != 1 else ''} (host: {shown}){macs}")


def read_calibration(path: str | Path, model: str, shape: tuple[int, ...]) -> np.ndarray:
    """Calibration inputs from a .npy file: [S, *input shape without its batch] or [S, *input shape].

    The file is mapped, not read: calibration takes a bounded piece of it at a time.
    """
    try:
        data = read_npy(path, mapped=True)
    except FormatError as exc:
        raise ModelError(f"calibration inputs: {exc.message}") from None
    if data.ndim == len(shape) + 1 and tuple(data.shape[1:]) == tuple(shape):
        data = data.reshape((-1,) + tuple(shape[1:]))
    if data.ndim != len(shape) or tuple(data.shape[1:]) != tuple(shape[1:]) or data.shape[0] < 1:
        raise ModelError(f"{path}: calibration inputs of shape {list(data.shape)} do not match the input of "
                         f"{model}, {list(shape)} (give [samples, {', '.join(map(str, shape[1:]))}])")
    if not np.issubdtype(data.dtype, np.number) or np.issubdtype(data.dtype, np.complexfloating):
        raise ModelError(f"{path}: calibration inputs must be real numbers, got {data.dtype}")
    return checked_calibration(data, str(path))


def checked_calibration(data: np.ndarray, where: str) -> np.ndarray:
    """Calibration inputs that can set scales: finite, and not all zero (checked a piece at a time)."""
    bad, nonzero = 0, False
    step = max(1, (64 << 20) // max(1, data[:1].nbytes))
    for start in range(0, len(data), step):
        piece = np.asarray(data[start:start + step])
        bad += int((~np.isfinite(piece)).sum()) if np.issubdtype(piece.dtype, np.floating) else 0
        nonzero = nonzero or bool(piece.any())
    if bad:
        raise ModelError(f"{where}: calibration inputs hold NaN or infinite values ({bad} of them); scales need "
                         "finite data")
    if not nonzero:
        raise ModelError(f"{where}: calibration inputs are all zero: they give no range to set the scales by "
                         "(give typical inputs of the model)")
    return data


def import_model(path: str | Path, calibration: str | Path | np.ndarray | None = None,
                 input_shapes: dict[str, tuple[int, ...]] | None = None, block: int = 16,
                 method: str = "mse", check: Callable[[Network], None] | None = None,
                 to_host: dict[str, str] | None = None) -> Imported:
    """Load, map, quantise and write an ONNX model (ModelError names the node or file at fault).

    ``input_shapes`` fixes input dimensions the model leaves open (a dynamic batch, ...); ``block`` is the
    configuration's BLOCK_OUT; ``method`` how calibration sets scales ("mse" or "max", see quantise);
    ``check`` sees the lowered network before any calibration (to refuse what the caller cannot use early);
    ``to_host`` names nodes to run on the host, with the reason (see vtacc.model.import_and_compile).
    """
    network = lower(load_graph(path, input_shapes), block, to_host)
    idle = idle_launches(network, HOST_OPS)
    while idle.keys() - (to_host or {}).keys():  # lowered again (afresh: lowering renames the graph's tensors)
        to_host = {**(to_host or {}), **idle}
        network = lower(load_graph(path, input_shapes), block, to_host)
        idle = idle_launches(network, HOST_OPS)
    if check is not None:
        check(network)
    release_all()  # reading and lowering the model touched every page of its file: a layer's come back when used
    data = None
    if calibration is not None:
        shape = network.shapes[network.input]
        if isinstance(calibration, np.ndarray):
            data = checked_calibration(np.asarray(calibration).reshape((-1,) + tuple(shape[1:])),
                                       "the calibration array")
        else:
            data = read_calibration(calibration, network.name, shape)
    qnet = quantise(network, data, method, keep=SAMPLES if data is not None else 0)
    if data is not None:
        computed = correct_biases(qnet, np.asarray(data[:SAMPLES], dtype=np.float64), qnet.float_sample)
        release_all()  # the float weights are used no more (pages of the model file)
        qnet.sqnr = measure(qnet, data, computed=computed)
        del computed
        qnet.float_sample = None  # every float activation of the sample: needed no more, let go before compiling
    release_all()  # the float weights too (pages of the model file)
    parts = partition(qnet)
    source, params = emit_vk(qnet) if len(parts) == 1 and parts[0].kind == Side.VTA else ("", {})
    return Imported(qnet, source, params, parts)
