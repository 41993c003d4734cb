"""Where each layer runs: maximal runs of consecutive VTA layers become one VTA launch, runs of host
layers one host step; the tensors crossing between them are int8 at their scales."""

from __future__ import annotations

from dataclasses import dataclass

from vtasm.formats.network import HostStep, NetTensor, Side

from .convert import Layer, LayerKind, Network
from .kinds import layer_macs
from .quantised import QLayer, QuantisedNetwork


@dataclass
class Part:
    """Consecutive layers that run on one side: what they read from before and write for later."""

    kind: Side
    layers: list[QLayer]
    inputs: list[str]
    outputs: list[str]


def _reads(q: QLayer) -> list[str]:
    return list(q.layer.inputs)


def runs(kinds: list[LayerKind]) -> list[int]:
    """Each layer's run: maximal stretches of consecutive layers on one side (VTA or the host), numbered."""
    numbers: list[int] = []
    for k, kind in enumerate(kinds):
        same = k > 0 and (kinds[k - 1] == LayerKind.HOST) == (kind == LayerKind.HOST)
        numbers.append(numbers[-1] if same else (numbers[-1] + 1 if numbers else 0))
    return numbers


def idle_launches(net: Network, host_ops) -> dict[str, str]:
    """The nodes of VTA launches that would multiply nothing (additions, copies, poolings) between two host
    steps, when the host computes every one of them: on the host they join the steps around them, one
    step where there would be three (a vision transformer's residual additions between its normalisations).
    Node -> the reason the import report gives."""
    numbers = runs([layer.kind for layer in net.layers])
    host_runs = {run for layer, run in zip(net.layers, numbers, strict=True) if layer.kind == LayerKind.HOST}
    members: dict[int, list[Layer]] = {}
    for layer, run in zip(net.layers, numbers, strict=True):
        members.setdefault(run, []).append(layer)
    moved: dict[str, str] = {}
    for run, layers in members.items():
        if run in host_runs or run - 1 not in host_runs or run + 1 not in host_runs:
            continue
        nodes = [n for layer in layers for n in layer.sources]
        if any(layer_macs(layer) for layer in layers) or any(net.ops.get(n) not in host_ops for n in nodes):
            continue
        what = f"{len(layers)} layer{'s' if len(layers) != 1 else ''} that multipl{'y' if len(layers) != 1 else 'ies'}"
        moved.update(dict.fromkeys(nodes, f"between two host steps, a VTA launch of {what} nothing would cost "
                                          "two round trips"))
    return moved


def partition(qnet: QuantisedNetwork) -> list[Part]:
    """The network's layers split where they change sides (one part when VTA computes everything)."""
    groups: list[list[QLayer]] = []
    for q, run in zip(qnet.layers, runs([q.kind for q in qnet.layers]), strict=True):
        if run == len(groups):
            groups.append([])
        groups[run].append(q)
    home: dict[str, int] = {}
    for k, group in enumerate(groups):
        for q in group:
            home.update({t: k for t in q.layer.outputs if t})
    wanted: dict[int, set[str]] = {}
    for k, group in enumerate(groups):
        for q in group:
            for t in _reads(q):
                if t in home and home[t] != k:
                    wanted.setdefault(home[t], set()).add(t)
    for t in qnet.network.outputs:
        wanted.setdefault(home[t], set()).add(t)
    parts = []
    for k, group in enumerate(groups):
        written = [t for q in group for t in q.layer.outputs if t]
        inputs = list(dict.fromkeys(t for q in group for t in _reads(q) if home.get(t) != k))
        outputs = [t for t in written if t in wanted.get(k, set())]
        parts.append(Part(Side.HOST if group[0].kind == LayerKind.HOST else Side.VTA, group, inputs, outputs))
    return parts


def step_names(parts: list[Part]) -> list[str]:
    """Each part's step name in the network file: VTA launches vta1, vta2, ... in their order; a host step
    host<k>, k its place among all the steps."""
    names, launches = [], 0
    for k, part in enumerate(parts):
        launches += part.kind == Side.VTA
        names.append(f"vta{launches}" if part.kind == Side.VTA else f"host{k + 1}")
    return names


def host_step(part: Part, qnet: QuantisedNetwork, name: str) -> HostStep:
    """A host part as the network file's step: its ONNX nodes with static shapes."""
    return HostStep(name, [q.layer.host_node for q in part.layers], part.inputs, part.outputs)


def net_tensors(qnet: QuantisedNetwork, parts: list[Part]) -> dict[str, NetTensor]:
    """Every tensor passed between parts or in and out of the model, with its shape and scale."""
    net = qnet.network
    names = [net.input] + [t for p in parts for t in p.inputs + p.outputs] + list(net.outputs)
    return {t: NetTensor(t, net.shapes[t], qnet.exps[t], qnet.sixteenths(t)) for t in dict.fromkeys(names)}
