"""VTA configuration: the log2 parameters of vta_config.json and what follows from them.

isa.md section 1 defines the keys and derived sizes. A configuration is valid when
every element width is supported and every micro-op and instruction layout fits
(section 3); :func:`load_config` and :func:`config_from_dict` refuse anything else
with one line naming what does not fit and, for a layout that overflows, which
LOG_*_BUFF_SIZE value to lower, and to what.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError, FormatError
from .fileio import open_regular
from .isa import check_layouts_fit

LOG_KEYS = (
    "LOG_INP_WIDTH",
    "LOG_WGT_WIDTH",
    "LOG_ACC_WIDTH",
    "LOG_BATCH",
    "LOG_BLOCK",
    "LOG_UOP_BUFF_SIZE",
    "LOG_INP_BUFF_SIZE",
    "LOG_WGT_BUFF_SIZE",
    "LOG_ACC_BUFF_SIZE",
)

DEFAULT_CONFIG: dict = {
    "TARGET": "sim",
    "HW_VER": "0.0.2",
    "LOG_INP_WIDTH": 3,
    "LOG_WGT_WIDTH": 3,
    "LOG_ACC_WIDTH": 5,
    "LOG_BATCH": 0,
    "LOG_BLOCK": 4,
    "LOG_UOP_BUFF_SIZE": 15,
    "LOG_INP_BUFF_SIZE": 15,
    "LOG_WGT_BUFF_SIZE": 18,
    "LOG_ACC_BUFF_SIZE": 17,
}

# Element widths the toolchain handles: 8, 16 or 32 bits (numpy integer lanes).
_SUPPORTED_LOG_WIDTHS = (3, 4, 5)


@dataclass(frozen=True)
class VTAConfig:
    """One VTA configuration with its derived sizes (all in elements or bytes)."""

    log_inp_width: int
    log_wgt_width: int
    log_acc_width: int
    log_batch: int
    log_block: int
    log_uop_buff_size: int
    log_inp_buff_size: int
    log_wgt_buff_size: int
    log_acc_buff_size: int
    extra: tuple = field(default=(), compare=False)  # other keys (TARGET, HW_VER, ...)

    # -- tensor geometry -------------------------------------------------
    @property
    def batch(self) -> int:
        return 1 << self.log_batch

    @property
    def block_in(self) -> int:
        return 1 << self.log_block

    @property
    def block_out(self) -> int:
        return 1 << self.log_block

    @property
    def inp_width(self) -> int:
        return 1 << self.log_inp_width

    @property
    def wgt_width(self) -> int:
        return 1 << self.log_wgt_width

    @property
    def acc_width(self) -> int:
        return 1 << self.log_acc_width

    @property
    def out_width(self) -> int:
        return self.inp_width

    # -- element sizes in bytes -----------------------------------------------
    @property
    def inp_elem_bytes(self) -> int:
        return self.batch * self.block_in * self.inp_width // 8

    @property
    def wgt_elem_bytes(self) -> int:
        return self.block_out * self.block_in * self.wgt_width // 8

    @property
    def acc_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.acc_width // 8

    @property
    def out_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.out_width // 8

    @property
    def acc8_elem_bytes(self) -> int:
        return self.batch * self.block_out

    uop_elem_bytes = 4
    insn_bytes = 16

    @property
    def dram_align(self) -> int:
        """An alignment good for every memory type: a 4 KiB page, or the largest element if bigger."""
        return max(4096, self.inp_elem_bytes, self.wgt_elem_bytes, self.acc_elem_bytes, self.out_elem_bytes)

    # -- buffer depths (log2 and count of elements) ---------------------------
    @property
    def log_uop_depth(self) -> int:
        return self.log_uop_buff_size - 5 + 3

    @property
    def log_inp_depth(self) -> int:
        return self.log_inp_buff_size - self.log_batch - self.log_block - self.log_inp_width + 3

    @property
    def log_wgt_depth(self) -> int:
        return self.log_wgt_buff_size - 2 * self.log_block - self.log_wgt_width + 3

    @property
    def log_acc_depth(self) -> int:
        return self.log_acc_buff_size - self.log_batch - self.log_block - self.log_acc_width + 3

    @property
    def uop_depth(self) -> int:
        return 1 << self.log_uop_depth

    @property
    def inp_depth(self) -> int:
        return 1 << self.log_inp_depth

    @property
    def wgt_depth(self) -> int:
        return 1 << self.log_wgt_depth

    @property
    def acc_depth(self) -> int:
        return 1 << self.log_acc_depth

    # -- serialisation --------------------------------------------------------
    def to_dict(self) -> dict:
        """The configuration as a vta_config.json object (extra keys first, as read)."""
        out = dict(self.extra)
        for key in LOG_KEYS:
            out[key] = getattr(self, key.lower())
        return out

    def log_values(self) -> dict:
        """Only the LOG_* keys: what decides the encoding and the semantics."""
        return {key: getattr(self, key.lower()) for key in LOG_KEYS}

    def describe(self) -> str:
        """A short human name such as '1x16x16'."""
        return f"{self.batch}x{self.block_in}x{self.block_out}"


MAX_LOG = 32  # the largest LOG_* value looked at further (VTA's instructions have no wider field)


def config_from_dict(data: object, origin: str = "configuration") -> VTAConfig:
    """Build and validate a configuration from a parsed vta_config.json object."""
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a JSON object of LOG_* values")
    values = {}
    for key in LOG_KEYS:
        if key not in data:
            raise ConfigError(f"{origin}: missing key {key}")
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{origin}: {key} must be an integer, got {json.dumps(value)}")
        if value < 0:
            raise ConfigError(f"{origin}: {key} must not be negative, got {value}")
        if value > MAX_LOG:  # no field of a 128-bit instruction is that wide: refused before any arithmetic
            raise ConfigError(f"{origin}: {key}={value} is too large (at most {MAX_LOG}: a 2^{MAX_LOG} buffer or "
                              "element width cannot be encoded)")
        values[key.lower()] = value
    extra = tuple((k, v) for k, v in data.items() if k not in LOG_KEYS)
    cfg = VTAConfig(**values, extra=extra)
    _validate(cfg, origin)
    return cfg


def _validate(cfg: VTAConfig, origin: str) -> None:
    for key in ("LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH"):
        value = getattr(cfg, key.lower())
        if value not in _SUPPORTED_LOG_WIDTHS:
            raise ConfigError(
                f"{origin}: {key}={value} ({1 << value}-bit elements) is not supported; "
                "element widths must be 8, 16 or 32 bits (LOG 3..5)"
            )
    if cfg.acc_width < max(cfg.inp_width, cfg.wgt_width):
        raise ConfigError(
            f"{origin}: LOG_ACC_WIDTH={cfg.log_acc_width} is narrower than the inputs "
            f"({cfg.inp_width}-bit inputs, {cfg.wgt_width}-bit weights)"
        )
    for name, key in (
        ("uop", "LOG_UOP_BUFF_SIZE"),
        ("inp", "LOG_INP_BUFF_SIZE"),
        ("wgt", "LOG_WGT_BUFF_SIZE"),
        ("acc", "LOG_ACC_BUFF_SIZE"),
    ):
        depth = getattr(cfg, f"log_{name}_depth")
        if depth < 1:
            raise ConfigError(
                f"{origin}: {key}={getattr(cfg, key.lower())} leaves the {name} buffer "
                f"with {'less than one element' if depth < 0 else 'one element'}; "
                "it must hold at least two"
            )
    # Layout fit (micro-op in 32 bits, every instruction in 128 bits).
    problem = check_layouts_fit(cfg)
    if problem:
        raise ConfigError(f"{origin}: {problem}")


def default_config() -> VTAConfig:
    """The default 1x16x16 configuration of isa.md section 1."""
    return config_from_dict(dict(DEFAULT_CONFIG), "default configuration")


def load_config(path: str | Path) -> VTAConfig:
    """Read and validate a vta_config.json file."""
    p = Path(path)
    try:
        with open_regular(p, "configuration") as fh:
            text = fh.read(1 << 20).decode("utf-8")
    except FormatError as exc:
        raise ConfigError(exc.message) from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read configuration: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a JSON text file (a vta_config.json is expected)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    return config_from_dict(data, str(p))


def resolve_config(path: str | Path | None) -> VTAConfig:
    """The configuration a CLI uses: --config FILE, else ./vta_config.json, else the default."""
    if path is not None:
        return load_config(path)
    local = Path("vta_config.json")
    if local.is_file():
        return load_config(local)
    return default_config()
