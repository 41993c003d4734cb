"""From an ONNX model to a network file: import, write each VTA launch as kernel language, compile it with
the weights packed in, and put the launches and the host steps between them in order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vtacc.frontend.check import check_source
from vtacc.onnx import Imported, import_model
from vtacc.onnx.emit import emit_vk, program_names
from vtacc.onnx.partition import host_step, net_tensors, step_names
from vtasim.host.ops import OPS as HOST_OPS
from vtasim.timing.profile import Profile
from vtasm.config import VTAConfig
from vtasm.errors import CompileError, ModelError
from vtasm.formats.network import NetworkFile, Side, Step, VtaStep

from .compiler import Compiled
from .program_builder import compile_file


@dataclass
class CompiledModel:
    """An imported model, the program of each VTA launch, and the whole network as one file's contents."""

    imported: Imported
    launches: list[Compiled]
    network: NetworkFile
    vk_name: str

    @property
    def compiled(self) -> Compiled:
        """The first VTA launch's program (the only one when VTA computes the network whole)."""
        return self.launches[0]

    @property
    def input_name(self) -> str:
        return self.imported.input_name

    @property
    def output_name(self) -> str:
        return self.imported.output_name


def compile_imported(imported: Imported, cfg: VTAConfig, profile: Profile | None = None,
                     vk_name: str = "model.vk") -> CompiledModel:
    """Compile each VTA launch of an imported model (weights packed into its program) into a network."""
    qnet = imported.qnet
    launches: list[Compiled] = []
    steps: list[Step] = []
    n_vta = sum(p.kind == Side.VTA for p in imported.parts)
    for part, step_name in zip(imported.parts, step_names(imported.parts), strict=True):
        if part.kind == Side.HOST:
            steps.append(host_step(part, qnet, step_name))
            continue
        if imported.whole_on_vta:
            source, params, name = imported.source, imported.params, vk_name
        else:
            source, params = emit_vk(qnet, part)
            name = Path(vk_name).with_suffix(f".launch{len(launches) + 1}.vk").name if n_vta > 1 else vk_name
        try:
            compiled = compile_file(check_source(source, name), cfg, "main", profile, params=params)
        except CompileError as exc:
            raise _at_node(exc, source, qnet) from None
        launches.append(compiled)
        names = program_names(qnet, part)
        steps.append(VtaStep(step_name, compiled.program, {t: names[t] for t in part.inputs},
                             {t: names[t] for t in part.outputs}))
    net = qnet.network
    network = NetworkFile(net.name, net.opset, [net.input], list(net.outputs), net_tensors(qnet, imported.parts),
                          steps, {k: np.asarray(v) for k, v in net.constants.items()})
    return CompiledModel(imported, launches, network, vk_name)


class LaunchFailed(ModelError):
    """A VTA launch the compiler refused, told at the ONNX nodes of the layer it failed in (``nodes``; none
    when the error is not at a layer) with the compiler's own message (``cause``)."""

    def __init__(self, message: str, nodes: list[str], cause: str):
        super().__init__(message, node=nodes[0] if nodes else None)
        self.nodes, self.cause = nodes, cause


def _at_node(exc: CompileError, source: str, qnet) -> LaunchFailed:
    """A compile error of generated kernel language, told at the ONNX node(s) of the layer it is in."""
    net = qnet.network
    if exc.span is None:
        return LaunchFailed(f"{net.name}: VTA cannot compile it: {exc.message}", [], exc.message)
    lines = source.splitlines()[: exc.span.line]
    kernel = next((ln.split()[1].split("(")[0] for ln in reversed(lines) if ln.startswith("kernel ")), "main")
    if kernel == "main":  # a call in main: the layer it calls, or the concatenation it writes
        text = lines[-1].strip() if lines else ""
        call = text.split("=", 1)[-1].strip().split("(")[0]
        kernel = call if call != "concat" else text.split("=", 1)[0].strip()
    layer = next((q.layer for q in qnet.layers if q.layer.name == kernel or
                  kernel.endswith(q.layer.name)), None)
    if layer is None:
        return LaunchFailed(f"{net.name}: VTA cannot compile it: {exc.message}", [], exc.message)
    nodes = ", ".join(f"node '{n}' ({net.ops.get(n, '?')})" for n in layer.sources)
    return LaunchFailed(f"{net.name}: {nodes}: VTA cannot compile it: {exc.message}", list(layer.sources),
                        exc.message)


def compile_model(path: str | Path, cfg: VTAConfig, calibration: str | Path | np.ndarray | None = None,
                  profile: Profile | None = None,
                  input_shapes: dict[str, tuple[int, ...]] | None = None, method: str = "mse") -> CompiledModel:
    """Import an ONNX model (quantised with ``calibration`` by ``method``, open input dimensions fixed by
    ``input_shapes``) and compile it for ``cfg``."""
    return import_and_compile(path, cfg, calibration, profile, input_shapes, method)


def import_and_compile(path: str | Path, cfg: VTAConfig, calibration: str | Path | np.ndarray | None = None,
                       profile: Profile | None = None, input_shapes: dict[str, tuple[int, ...]] | None = None,
                       method: str = "mse", check=None) -> CompiledModel:
    """Import and compile a model; a layer VTA's compiler refuses (its tiles fit no buffer, ...) runs on the
    host instead when the host computes all of its ONNX nodes: the model is imported again with those nodes
    on the host (calibrated again: the scales around them change) until every launch compiles. The import
    report gives each moved node's reason. ModelError when a refused layer's nodes are not all the host's."""
    moved: dict[str, str] = {}
    vk_name = Path(path).with_suffix(".vk").name
    while True:
        imported = import_model(path, calibration, input_shapes, cfg.block_out, method, check, moved)
        try:
            return compile_imported(imported, cfg, profile, vk_name)
        except LaunchFailed as failed:
            ops = imported.qnet.network.ops
            if not failed.nodes or any(n in moved or ops.get(n) not in HOST_OPS for n in failed.nodes):
                raise
            moved.update(dict.fromkeys(failed.nodes, f"VTA cannot compile it: {failed.cause}"))
