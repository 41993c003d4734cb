"""Configuration loading, validation and --config resolution (isa.md section 1)."""

from __future__ import annotations

import json

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
