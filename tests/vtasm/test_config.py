"""Configuration loading, validation and --config resolution (isa.md section 1)."""

from __future__ import annotations

import json
import re

import pytest

from vtasm.config import (
    DEFAULT_CONFIG,
    LOG_KEYS,
    config_from_dict,
    default_config,
    load_config,
    resolve_config,
)
from vtasm.errors import ConfigError

from .paths import GOLDEN, require


def test_default_derived_values():
    cfg = default_config()
    assert (cfg.batch, cfg.block_in, cfg.block_out) == (1, 16, 16)
    assert (cfg.inp_elem_bytes, cfg.wgt_elem_bytes, cfg.acc_elem_bytes, cfg.out_elem_bytes) == (
        16,
        256,
        64,
        16,
    )
    assert (cfg.log_uop_depth, cfg.log_inp_depth, cfg.log_wgt_depth, cfg.log_acc_depth) == (13, 11, 10, 11)
    assert (cfg.uop_depth, cfg.inp_depth, cfg.wgt_depth, cfg.acc_depth) == (8192, 2048, 1024, 2048)
    assert cfg.describe() == "1x16x16"


def test_to_dict_keeps_target_and_version():
    data = default_config().to_dict()
    assert data["TARGET"] == "sim" and data["HW_VER"] == "0.0.2"
    assert data == DEFAULT_CONFIG


@pytest.mark.parametrize("key", LOG_KEYS)
def test_missing_key_is_named(key):
    data = dict(DEFAULT_CONFIG)
    del data[key]
    with pytest.raises(ConfigError, match=f"missing key {key}"):
        config_from_dict(data)


@pytest.mark.parametrize("value", ["4", 4.0, True, None, [4]])
def test_wrong_type_is_refused(value):
    data = dict(DEFAULT_CONFIG, LOG_BLOCK=value)
    with pytest.raises(ConfigError, match="LOG_BLOCK must be an integer"):
        config_from_dict(data)


def test_not_an_object():
    with pytest.raises(ConfigError, match="JSON object"):
        config_from_dict([1, 2, 3])


def test_negative_value():
    with pytest.raises(ConfigError, match="LOG_BATCH must not be negative"):
        config_from_dict(dict(DEFAULT_CONFIG, LOG_BATCH=-1))


@pytest.mark.parametrize("key", ["LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH"])
@pytest.mark.parametrize("value", [0, 2, 6])
def test_unsupported_widths(key, value):
    with pytest.raises(ConfigError, match=f"{key}={value}.*not supported"):
        config_from_dict(dict(DEFAULT_CONFIG, **{key: value}))


def test_accumulator_narrower_than_inputs():
    with pytest.raises(ConfigError, match="LOG_ACC_WIDTH"):
        config_from_dict(dict(DEFAULT_CONFIG, LOG_ACC_WIDTH=3, LOG_INP_WIDTH=4))


def test_buffer_too_small():
    with pytest.raises(ConfigError, match="LOG_UOP_BUFF_SIZE"):
        config_from_dict(dict(DEFAULT_CONFIG, LOG_UOP_BUFF_SIZE=2))


def test_load_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read configuration"):
        load_config(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"LOG_BATCH": 0,,}')
    with pytest.raises(ConfigError, match=r"bad.json:1:\d+: invalid JSON"):
        load_config(bad)


def test_resolve_explicit_then_local_then_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_config(None) == default_config()
    (tmp_path / "vta_config.json").write_text(json.dumps(dict(DEFAULT_CONFIG, LOG_BATCH=1)))
    assert resolve_config(None).batch == 2
    explicit = tmp_path / "other.json"
    explicit.write_text(json.dumps(dict(DEFAULT_CONFIG, LOG_BLOCK=5)))
    cfg = resolve_config(explicit)
    assert (cfg.batch, cfg.block_in) == (1, 32)


def test_resolve_explicit_missing_file_is_an_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError):
        resolve_config(tmp_path / "nope.json")


def test_equality_ignores_target_and_version():
    a = config_from_dict(dict(DEFAULT_CONFIG, TARGET="pynq"))
    assert a == default_config()
    assert a.to_dict()["TARGET"] == "pynq"


def _suggestions(message: str) -> dict[str, int]:
    """The ``LOG_*_BUFF_SIZE to N`` fixes a refusal suggests."""
    return {key: int(value) for key, value in re.findall(r"(LOG_\w+_BUFF_SIZE) to (\d+)", message)}


OVERFLOWING = {
    "bad_acc18": {"LOG_ACC_BUFF_SIZE": 18},
    "bad_block8": {"LOG_BLOCK": 3},
    "bad_uop16": {"LOG_UOP_BUFF_SIZE": 16},
    "inp17": {"LOG_INP_BUFF_SIZE": 17},  # the input depth now sizes the micro-op's src_idx
    "wgt21": {"LOG_WGT_BUFF_SIZE": 21},
}


@pytest.mark.parametrize("name", sorted(OVERFLOWING))
def test_a_layout_overflow_names_the_buffer_sizes_to_lower_and_every_suggestion_works(name):
    data = dict(DEFAULT_CONFIG, **OVERFLOWING[name])
    if name.startswith("bad_"):  # the golden bad configurations say the same
        data = json.loads(require(GOLDEN / f"{name}.config.json").read_text())
    with pytest.raises(ConfigError) as info:
        config_from_dict(data)
    message = info.value.render()
    assert "\n" not in message and "; lower LOG_" in message
    fixes = _suggestions(message)
    assert fixes
    for key, value in fixes.items():
        assert value < data[key]
        config_from_dict(dict(data, **{key: value}))  # each suggestion alone makes the layouts fit
        with pytest.raises(ConfigError):  # and is the smallest change of that value that does
            config_from_dict(dict(data, **{key: value + 1}))


def test_a_micro_op_overflow_says_what_sizes_each_field():
    with pytest.raises(ConfigError) as info:
        config_from_dict(dict(DEFAULT_CONFIG, LOG_ACC_BUFF_SIZE=18))
    message = info.value.render()
    assert "micro-op needs 34 bits but must fit 32" in message
    assert "src_idx 12 bits (log2 of the larger of the inp and acc depths)" in message
    assert "dst_idx 12 bits (log2 of the acc depth)" in message and "wgt_idx 10 bits (log2 of the wgt depth)" in message
    assert _suggestions(message) == {"LOG_ACC_BUFF_SIZE": 17}
    assert "lowering LOG_INP_BUFF_SIZE alone cannot help" in message
    with pytest.raises(ConfigError) as info:
        config_from_dict(dict(DEFAULT_CONFIG, LOG_INP_BUFF_SIZE=17))
    assert "LOG_INP_BUFF_SIZE to 15" in info.value.render()


def test_an_instruction_overflow_names_the_field_and_the_buffer_sizes():
    with pytest.raises(ConfigError) as info:
        config_from_dict(dict(DEFAULT_CONFIG, LOG_UOP_BUFF_SIZE=16))
    message = info.value.render()
    assert "GEMM instruction needs more than 128 bits: field wgt_factor_out" in message
    assert "uop_bgn 14 bits (log2 of the uop depth)" in message
    assert message.endswith("lower LOG_UOP_BUFF_SIZE to 15 or LOG_ACC_BUFF_SIZE to 10")
