"""ONNX models as the compiler's input: load, check, quantise for VTA, and write as kernel language.

``import_model`` runs the steps: the graph (graph.py), VTA-sized float layers
(network.py), int8 layers with power-of-two scales (quantise.py), and the
kernel-language text with its weights (emit_vk.py). reference.py executes
the quantised network in numpy, bit for bit what VTA must produce.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vtasm.errors import FormatError, ModelError
from vtasm.fileio import read_npy

from .emit_vk import emit_vk, kernel_name
from .graph import load_graph
from .network import lower
from .quantise import QuantisedNetwork, quantise


@dataclass
class Imported:
    """An imported model: its quantised network, its kernel-language text and the weights main takes."""

    qnet: QuantisedNetwork
    source: str
    params: dict[str, np.ndarray]

    @property
    def input_name(self) -> str:
        """The program's input tensor (the model's input, named for the kernel language)."""
        return kernel_name(self.qnet.network.input)

    @property
    def output_name(self) -> str:
        return kernel_name(self.qnet.network.output)

    def report(self) -> str:
        """Each layer's scales and the calibration range, one line each."""
        q = self.qnet
        lines = [f"{q.network.name}: {len(q.layers)} layers; input '{q.network.input}' scale 2^{q.input_exp}, "
                 f"output '{q.network.output}' scale 2^{q.output_exp}"]
        for layer in q.layers:
            seen = q.ranges.get(layer.layer.output)
            weights = ""
            if layer.w_exps is not None:
                lo, hi = int(layer.w_exps.min()), int(layer.w_exps.max())
                weights = f", weights 2^{lo}" + (f"..2^{hi}" if lo != hi else "")
            shift = "" if layer.kind not in ("conv", "dense") else (
                f", shift {int(layer.shift)}" if np.ndim(layer.shift) == 0 else
                f", shifts {int(np.min(layer.shift))}..{int(np.max(layer.shift))}")
            rng = f", calibration range +-{seen:.4g}" if seen is not None else ""
            lines.append(f"  {layer.name:<16} {layer.kind:<8} out 2^{layer.out_exp}{weights}{shift}{rng}")
        lines += [f"  note: {n}" for n in q.notes]
        return "\n".join(lines) + "\n"


def read_calibration(path: str | Path, model: str, shape: tuple[int, ...]) -> np.ndarray:
    """Calibration inputs from a .npy file: [S, *input shape without its batch] or [S, *input shape]."""
    try:
        data = read_npy(path)
    except FormatError as exc:
        raise ModelError(f"calibration inputs: {exc.message}") from None
    if data.ndim == len(shape) + 1 and tuple(data.shape[1:]) == tuple(shape):
        data = data.reshape((-1,) + tuple(shape[1:]))
    if data.ndim != len(shape) or tuple(data.shape[1:]) != tuple(shape[1:]) or data.shape[0] < 1:
        raise ModelError(f"{path}: calibration inputs of shape {list(data.shape)} do not match the input of "
                         f"{model}, {list(shape)} (give [samples, {', '.join(map(str, shape[1:]))}])")
    if not np.issubdtype(data.dtype, np.number):
        raise ModelError(f"{path}: calibration inputs must be numbers, got {data.dtype}")
    return checked_calibration(data.astype(np.float64), str(path))


def checked_calibration(data: np.ndarray, where: str) -> np.ndarray:
    """Calibration inputs that can set scales: finite, and not all zero."""
    if not np.isfinite(data).all():
        raise ModelError(f"{where}: calibration inputs hold NaN or infinite values ({int((~np.isfinite(data)).sum())} "
                         "of them); scales need finite data")
    if not data.any():
        raise ModelError(f"{where}: calibration inputs are all zero: they give no range to set the scales by "
                         "(give typical inputs of the model)")
    return data


def import_model(path: str | Path, calibration: str | Path | np.ndarray | None = None,
                 input_shapes: dict[str, tuple[int, ...]] | None = None) -> Imported:
    """Load, map, quantise and write an ONNX model (ModelError names the node or file at fault).

    ``input_shapes`` fixes input dimensions the model leaves open (a dynamic batch, ...).
    """
    network = lower(load_graph(path, input_shapes))
    data = None
    if calibration is not None:
        shape = network.shapes[network.input]
        if isinstance(calibration, np.ndarray):
            data = checked_calibration(calibration.astype(np.float64).reshape((-1,) + tuple(shape[1:])),
                                       "the calibration array")
        else:
            data = read_calibration(calibration, network.name, shape)
    qnet = quantise(network, data)
    source, params = emit_vk(qnet)
    return Imported(qnet, source, params)
