"""Element-wise work on a resident accumulator tile, lowered to ALU (and GEMM) steps.

The evaluator walks an operator's expression for one output tile. Values live
in accumulator *slots* (regions of one tile each). Constants become ALU
immediates, per-channel vectors a small broadcast slot, full int32 tensors an
ACC load, full int8 tensors an INP load moved into the accumulator by the GEMM
core with an identity weight tile (or a negated identity, which is how int8
tensors are subtracted: the ALU has no subtraction). What the hardware cannot
do is refused with the reason.

The same walk, run against a counting target, tells the tiler how many slots
an operator needs: one source of truth for both.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from vtacc.frontend import checked as ck
from vtacc.frontend.check_support import wrap32
from vtasm.errors import CompileError

from .layouts import ACC, ACT, BIAS, DramTensor

IMM_MIN, IMM_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
SHIFT_CHUNK_RIGHT, SHIFT_CHUNK_LEFT = 15, 16  # portable shift amounts: -16..15


class Target:
    """What the evaluator drives: slot allocation and the steps of one tile."""

    def alloc(self) -> int: ...
    def free(self, slot: int) -> None: ...
    def load_full(self, tensor: DramTensor, slot: int) -> None: ...
    def gemm_int8(self, tensor: DramTensor, slot: int, negate: bool, accumulate: bool) -> None: ...
    def alu_imm(self, slot: int, op: str, imm: int) -> None: ...
    def alu_tensor(self, slot: int, op: str, src_slot: int) -> None: ...
    def alu_bias(self, slot: int, op: str, tensor: DramTensor) -> None: ...
    def copy(self, dst: int, src: int) -> None: ...
    def zero(self, slot: int) -> None: ...
    def alu_const(self, slot: int, op: str, value: int) -> None: ...


@dataclass
class Needs:
    """Resources one tile's epilogue needs beyond the producer's slot."""

    acc_slots: int = 1  # slots alive at once, including the result
    inp_temp: bool = False  # an int8 operand passes through the input buffer
    identity: bool = False
    neg_identity: bool = False
    biases: tuple[str, ...] = ()  # per-channel vectors, constant vectors included (one small slot each)
    constants: tuple[int, ...] = ()  # values too wide for a 16-bit immediate, applied as constant vectors
    # per tile, for the cost model: passes over the tile's elements on each unit, and full-tile loads
    alu_passes: int = 0  # ALU instructions with an immediate
    alu_tensor_passes: int = 0  # ALU instructions with two tensors (bias and constant vectors included)
    gemm_passes: int = 0  # GEMM instructions (resets, int8 operands through the identity weights)
    tile_loads: int = 0  # whole-tile loads (int32 operands into the accumulator, int8 ones into inputs)


class CountingTarget(Target):
    """Counts slots and resources without emitting anything."""

    def __init__(self) -> None:
        self.live = 0
        self.needs = Needs(acc_slots=0)
        self._biases: list[str] = []
        self._next = 0

    def alloc(self) -> int:
        self.live += 1
        self.needs.acc_slots = max(self.needs.acc_slots, self.live)
        self._next += 1
        return self._next

    def free(self, slot: int) -> None:
        self.live -= 1

    def gemm_int8(self, tensor, slot, negate, accumulate) -> None:
        self.needs.inp_temp = True
        self.needs.tile_loads += 1
        self.needs.gemm_passes += 1 if accumulate else 2
        if negate:
            self.needs.neg_identity = True
        else:
            self.needs.identity = True

    def alu_bias(self, slot, op, tensor) -> None:
        self.needs.alu_tensor_passes += 1
        if tensor.name not in self._biases:
            self._biases.append(tensor.name)
            self.needs.biases = tuple(self._biases)

    def alu_const(self, slot, op, value) -> None:
        self.needs.alu_tensor_passes += 1
        if value not in self.needs.constants:
            self.needs.constants += (value,)
            self._biases.append(constant_name(value))
            self.needs.biases = tuple(self._biases)

    def load_full(self, tensor, slot) -> None:
        self.needs.tile_loads += 1

    def alu_imm(self, slot, op, imm) -> None:
        self.needs.alu_passes += 1

    def alu_tensor(self, slot, op, src_slot) -> None:
        self.needs.alu_tensor_passes += 1

    def copy(self, dst, src) -> None:
        self.needs.gemm_passes += 1
        self.needs.alu_tensor_passes += 1

    def zero(self, slot) -> None:
        self.needs.gemm_passes += 1


def _uses(node: ck.Node, counts: Counter) -> None:
    counts[id(node)] += 1
    if counts[id(node)] > 1:
        return
    if isinstance(node, ck.Binary):
        _uses(node.a, counts)
        _uses(node.b, counts)
    elif isinstance(node, ck.Cast):
        _uses(node.x, counts)


def _pow2(value: int) -> int | None:
    """``k`` when ``value`` is ``2**k`` modulo 2**32 (so -2**31 is 2**31), else None."""
    value %= 1 << 32
    return value.bit_length() - 1 if value > 0 and value & (value - 1) == 0 else None


class Evaluator:
    """Evaluates one operator's expression into accumulator slots of a target."""

    def __init__(self, expr: ck.Node, producer: ck.Node | None, operands: dict[int, DramTensor], target: Target):
        self.expr = expr
        self.producer = producer
        self.operands = operands
        self.t = target
        self.remaining: Counter = Counter()
        _uses(expr, self.remaining)
        self.where: dict[int, int] = {}  # id(node) -> slot holding its value (shared nodes)

    def run(self, producer_slot: int | None) -> int:
        """Evaluate the whole expression; returns the slot holding the result."""
        if self.producer is not None:
            self.where[id(self.producer)] = producer_slot
        return self._owned(self.expr)

    # -- values -------------------------------------------------------------
    def _value(self, node: ck.Node) -> int:
        """A slot holding the node's value (may be shared with later uses)."""
        key = id(node)
        if key in self.where:
            return self.where[key]
        slot = self._compute(node)
        self.where[key] = slot
        return slot

    def _owned(self, node: ck.Node) -> int:
        """A slot holding the node's value that the caller may overwrite."""
        slot = self._value(node)
        self.remaining[id(node)] -= 1
        if self.remaining[id(node)] > 0:
            copy = self.t.alloc()
            self.t.copy(copy, slot)
            return copy
        return slot

    def _compute(self, node: ck.Node) -> int:
        if isinstance(node, ck.TensorRef):
            tensor = self.operands[id(node)]
            slot = self.t.alloc()
            if tensor.kind == ACT:
                self.t.gemm_int8(tensor, slot, negate=False, accumulate=False)
            elif tensor.kind == ACC:
                self.t.load_full(tensor, slot)
            else:  # a per-channel vector on its own: broadcast it into a zeroed tile
                self.t.zero(slot)
                self.t.alu_bias(slot, "add", tensor)
            return slot
        if isinstance(node, ck.Cast):
            slot = self._owned(node.x)
            if node.dtype == ck.INT8 or (isinstance(node, ck.Cast) and node.dtype == ck.INT8):
                self._shift(slot, -24, node)
                self._shift(slot, 24, node)
            return slot
        if isinstance(node, ck.Binary):
            return self._binary(node)
        if isinstance(node, ck.Const):
            raise CompileError("a constant alone is not a tensor value; combine it with a tensor", node.span)
        raise CompileError(f"{type(node).__name__} cannot appear here", node.span)

    def _binary(self, node: ck.Binary) -> int:
        a, b, op = node.a, node.b, node.op
        if isinstance(a, ck.Const) and op in ("add", "min", "max", "mul"):
            a, b = b, a
        elif self._is_bias(a) and not isinstance(b, ck.Const) and op in ("add", "min", "max"):
            a, b = b, a  # the vector as the broadcast source operand
        tensor_b = self.operands.get(id(b)) if isinstance(b, ck.TensorRef) else None
        if isinstance(a, ck.Const) and op == "sub":
            return self._negate_plus(b, tensor_b, a.value, node)
        if isinstance(a, ck.Const):
            raise CompileError(f"'{_SYMBOL.get(op, op)}' with a constant on the left has no VTA instruction; "
                               "rewrite it with the tensor first", node.span)
        if op == "mul" and isinstance(b, ck.Const) and _pow2(b.value) is None and _pow2(-b.value) is not None:
            # x * -2**k is (-x) << k: negate an int8 tensor on the GEMM core, then shift
            slot = self._negate_plus(a, self.operands.get(id(a)) if isinstance(a, ck.TensorRef) else None, 0, node)
            self._shift(slot, -_pow2(-b.value), node)
            return slot
        if tensor_b is not None and tensor_b.kind == ACT and op in ("add", "sub"):  # re-read from DRAM each use
            slot = self._owned(a)
            self.remaining[id(b)] -= 1
            self.t.gemm_int8(tensor_b, slot, negate=(op == "sub"), accumulate=True)
            return slot
        if op == "sub" and not isinstance(b, ck.Const):
            raise CompileError(
                "the VTA ALU cannot subtract tensors (it has no SUB or negation, and MUL exists only in the "
                "behavioral simulator); only int8 tensor parameters can be subtracted (through the GEMM core)",
                node.span)
        slot = self._owned(a)
        if isinstance(b, ck.Const):
            self._const_op(slot, op, b.value, node)
        elif tensor_b is not None and tensor_b.kind == BIAS:
            self.remaining[id(b)] -= 1
            if op not in ("add", "min", "max", "shr"):
                raise CompileError(f"'{_SYMBOL.get(op, op)}' with a per-channel vector is not supported", node.span)
            self.t.alu_bias(slot, op, tensor_b)
        else:
            if op in ("mul", "shl"):
                what = "multiply two tensors" if op == "mul" else "shift left by a tensor"
                raise CompileError(f"VTA's portable ALU cannot {what} (MUL exists only in the behavioral "
                                   "simulator; shifts by tensors are portable only to the right)", node.span)
            other = self._owned(b)
            self.t.alu_tensor(slot, op, other)
            self.t.free(other)
        return slot

    def _negate_plus(self, x: ck.Node, tensor: DramTensor | None, constant: int, node: ck.Node) -> int:
        """``constant - x``: an int8 tensor is negated on the GEMM core (negated identity weights)."""
        if tensor is None or tensor.kind != ACT:
            raise CompileError(
                "negating a value needs a subtraction or MUL, which the portable VTA ALU lacks; only int8 tensor "
                "parameters can be negated (through the GEMM core)", node.span)
        self.remaining[id(x)] -= 1
        slot = self.t.alloc()
        self.t.zero(slot)
        self.t.gemm_int8(tensor, slot, negate=True, accumulate=True)
        if constant:
            self._const_op(slot, "add", constant, node)
        return slot

    def _is_bias(self, node: ck.Node) -> bool:
        tensor = self.operands.get(id(node)) if isinstance(node, ck.TensorRef) else None
        return tensor is not None and tensor.kind == BIAS

    def _const_op(self, slot: int, op: str, value: int, node: ck.Node) -> None:
        if op == "sub":  # x - c is x + (-c) modulo 2**32: -(-2**31) wraps to -2**31
            op, value = "add", wrap32(-value)
        if op == "mul" and value in (0, 1):
            if value == 0:
                self.t.zero(slot)
            return
        if op == "mul":
            k = _pow2(value)
            if k is None:
                raise CompileError(
                    f"multiplication by {value} needs MUL, which exists only in the behavioral simulator; "
                    "multiply by a power of two (a shift) instead", node.span)
            op, value = "shl", k
        if op == "shl":
            self._shift(slot, -value, node)
        elif op == "shr":
            self._shift(slot, value, node)
        elif op == "add":
            if abs(value) > 4 * IMM_MAX:  # wider than a few immediates: one add of a constant vector
                self.t.alu_const(slot, "add", value)
                return
            while value:
                part = max(IMM_MIN, min(IMM_MAX, value))
                self.t.alu_imm(slot, "add", part)
                value -= part
        else:
            if (op == "min" and value >= INT32_MAX) or (op == "max" and value <= INT32_MIN):
                return  # no int32 value is past it: nothing to do
            if not IMM_MIN <= value <= IMM_MAX:  # too wide for an immediate: a constant vector operand
                self.t.alu_const(slot, op, value)
                return
            self.t.alu_imm(slot, op, value)

    def _shift(self, slot: int, amount: int, node: ck.Node) -> None:
        """Shift right by ``amount`` (left if negative) in portable steps (-16..15)."""
        if not -31 <= amount <= 31:
            raise CompileError(f"shift by {abs(amount)} is outside 0..31", node.span)
        while amount > 0:
            step = min(amount, SHIFT_CHUNK_RIGHT)
            self.t.alu_imm(slot, "shr", step)
            amount -= step
        while amount < 0:
            step = min(-amount, SHIFT_CHUNK_LEFT)
            self.t.alu_imm(slot, "shr", -step)
            amount += step


def constant_name(value: int) -> str:
    """The DRAM vector holding a constant too wide for an immediate (one per value and operator width)."""
    return f"__const_{'m' if value < 0 else ''}{abs(value)}"


_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "shr": ">>", "shl": "<<", "min": "min", "max": "max"}


def analyse(expr: ck.Node, producer: ck.Node | None, operands: dict[int, DramTensor]) -> Needs:
    """What one tile's epilogue needs (raises CompileError for what VTA cannot do)."""
    target = CountingTarget()
    slot = target.alloc() if producer is not None else None
    Evaluator(expr, producer, operands, target).run(slot)
    return target.needs
