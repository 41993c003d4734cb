"""Every key of a timing profile, declared once: its TOML section and name, the Profile field it sets, the
smallest value it takes and what it means. profile.py reads and checks profiles by this table, and the
table of docs/timing.md is made from it (``python -m vtasim.timing.profile`` prints it; a test
compares)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    """One profile key: ``[section] name = value`` in a profile file, ``section.name=value`` on --set."""

    section: str
    name: str
    attr: str  # the Profile field
    least: int  # the smallest value it takes (integer keys)
    meaning: str

    @property
    def spelt(self) -> str:
        return f"{self.section}.{self.name}"


KEYS: tuple[Key, ...] = (
    Key("memory", "bus_bytes", "bus_bytes", 1, "bytes per beat"),
    Key("memory", "burst_beats", "burst_beats", 1, "longest burst"),
    Key("memory", "burst_boundary_bytes", "burst_boundary_bytes", 0, "a burst never crosses such a boundary "
        "(0: none)"),
    Key("memory", "latency", "latency", 0, "memory latency N in cycles"),
    Key("memory", "reads_in_flight", "reads_in_flight", 1, "reads the memory engine has outstanding"),
    Key("memory", "client_reads_in_flight", "client_reads_in_flight", 1, "reads one load unit issues before its "
        "data returns"),
    Key("memory", "read_setup", "read_setup", 0, "cycles from a read's acceptance to its first beat, beyond N"),
    Key("memory", "write_setup", "write_setup", 0, "cycles from a write's acceptance to its first data beat"),
    Key("memory", "write_response", "write_response", 0, "cycles from the last data beat to the acknowledgement, "
        "beyond N"),
    Key("memory", "store_bubble", "store_bubble", 0, "idle cycles after each output element's beats"),
    Key("memory", "wgt_beat_cycles", "wgt_beat_cycles", 1, "cycles a weight load takes per beat (the HLS bank's "
        "read-modify-write; the memory serves other clients meanwhile)"),
    Key("memory", "row_setup", "row_setup", 0, "0: a load's rows overlap; else every row of a load or store is a "
        "transfer of its own, requested this many cycles after the row before is done (the HLS cores' memcpy "
        "per row; the first row too)"),
    Key("memory", "store_row_setup", "store_row_setup", 0, "with row_setup set, the same for a store's rows past "
        "the first, counted from the answer to the row before (the first row waits row_setup)"),
    Key("memory", "read_priority", "read_priority", 0, "the read clients in the arbiter's order, first served "
        "first"),
    Key("memory", "write_command_beats", "write_command_beats", 1, "beats a store sends before it waits for their "
        "answers (a row is one command or more)"),
    Key("dma", "uop_fixed", "dma_uop_fixed", 0, "cycles from a micro-op load's start to its first request "
        "(decoding: the HLS cores' per-call costs)"),
    Key("dma", "inp_fixed", "dma_inp_fixed", 0, "the same for an input load"),
    Key("dma", "wgt_fixed", "dma_wgt_fixed", 0, "the same for a weight load"),
    Key("dma", "acc_fixed", "dma_acc_fixed", 0, "the same for an accumulator load"),
    Key("dma", "out_fixed", "dma_out_fixed", 0, "the same for a store"),
    Key("dma", "pad_by_element", "dma_pad_by_element", 0, "1: padding writes a whole element a cycle; 0: a bus "
        "beat a cycle"),
    Key("dma", "pad_run", "dma_pad_run", 0, "cycles each run of padding costs besides its elements (the top rows, "
        "each row's left and right, the bottom rows: a loop each on the HLS cores)"),
    Key("dma", "pad_during_reads", "dma_pad_during_reads", 0, "0: a load writes its padding between its rows' "
        "requests; 1: it issues its requests at once and writes all its padding while they are in flight, its "
        "data after it (the 2021 design)"),
    Key("dma", "empty_is_call", "dma_empty_is_call", 0, "0: a LOAD or STORE of x_size 0 is a NOP of "
        "`modules.sync_cycles` (the Chisel modules skip its transfer); 1: it runs as any transfer of its type "
        "does, its fixed cost and each of its y_size rows' `row_setup`, without a memory request (the HLS cores "
        "call their function for it)"),
    Key("dma", "uop_beat_bytes", "dma_uop_beat_bytes", 1, "bytes of micro-ops a beat carries (the bus width, or "
        "HLS's 32-bit micro-op port)"),
    Key("fetch", "chunk", "fetch_chunk", 1, "instructions read by one fetch burst"),
    Key("fetch", "start", "fetch_start", 0, "cycles from launch to the first fetch"),
    Key("fetch", "dispatch", "fetch_dispatch", 1, "cycles per dispatched instruction"),
    Key("fetch", "overlap", "fetch_overlap", 0, "0: a chunk is dispatched once all of it is in; 1: each "
        "instruction as soon as its beats are in (the HLS fetch core's pipelined loop)"),
    Key("fetch", "gap", "fetch_gap", 0, "cycles from a chunk's last dispatch to the next fetch"),
    Key("fetch", "queue_depth", "queue_depth", 1, "entries of each module's command queue"),
    Key("modules", "insn_gap", "insn_gap", 0, "cycles between one instruction's end and the next start"),
    Key("modules", "sync_cycles", "sync_cycles", 0, "cycles of a NOP load or store (x_size 0)"),
    Key("modules", "token_latency", "token_latency", 0, "cycles from a push until the token can be popped (load to "
        "compute, compute to store)"),
    Key("modules", "g2l_latency", "g2l_latency", 0, "the same for compute's tokens to load"),
    Key("modules", "s2g_latency", "s2g_latency", 0, "the same for store's tokens to compute"),
    Key("modules", "finish_cycles", "finish_cycles", 0, "cycles of FINISH"),
    Key("gemm", "per_execution", "gemm_per_execution", 0, "cycles per micro-op execution"),
    Key("gemm", "reset_per_execution", "gemm_reset_per_execution", 0, "the same for a reset GEMM"),
    Key("gemm", "drain", "gemm_drain", 0, "pipeline drain, instructions of more than one execution"),
    Key("gemm", "reset_drain", "gemm_reset_drain", 0, "the same for a reset GEMM (it reads no operands)"),
    Key("gemm", "per_iteration", "gemm_per_iteration", 0, "fill paid by every (outer, inner) iteration"),
    Key("gemm", "fixed", "gemm_fixed", 0, "cycles per instruction besides the above"),
    Key("alu", "imm_per_execution", "alu_imm_per_execution", 0, "cycles per execution with an immediate"),
    Key("alu", "tensor_per_execution", "alu_tensor_per_execution", 0, "cycles per tensor-tensor execution"),
    Key("alu", "drain", "alu_drain", 0, "pipeline drain"),
    Key("alu", "per_iteration", "alu_per_iteration", 0, "fill paid by every (outer, inner) iteration"),
    Key("alu", "fixed", "alu_fixed", 0, "cycles per instruction besides the above"),
    Key("alu", "token_lead", "alu_token_lead", 0, "cycles before its end an ALU instruction pushes its tokens (its "
        "last results still in the pipeline)"),
)
SECTIONS = tuple(dict.fromkeys(k.section for k in KEYS))
BY_SPELLING = {k.spelt: k for k in KEYS}
BY_ATTR = {k.attr: k for k in KEYS}


def markdown_table(profiles) -> str:
    """The table of docs/timing.md: every key, its meaning and its value in each of ``profiles``."""
    def shown(value) -> str:
        return ", ".join(value) if isinstance(value, tuple) else str(value)

    lines = [f"| key | meaning | {' | '.join(p.name for p in profiles)} |",
             "|---|---|" + "---:|" * len(profiles)]
    lines += [f"| `{k.spelt}` | {k.meaning} | {' | '.join(shown(getattr(p, k.attr)) for p in profiles)} |"
              for k in KEYS]
    return "\n".join(lines) + "\n"

