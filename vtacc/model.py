"""From an ONNX model to a VTA program: import, write as kernel language, compile with the weights packed in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vtacc.frontend.check import check_source
from vtacc.frontend.onnx import Imported, import_model
from vtasim.timing.profile import Profile
from vtasm.config import VTAConfig

from .compiler import Compiled
from .program_builder import compile_file


@dataclass
class CompiledModel:
    """An imported model and its program (inputs: the model's input only; weights are program data)."""

    imported: Imported
    compiled: Compiled
    vk_name: str

    @property
    def input_name(self) -> str:
        return self.imported.input_name

    @property
    def output_name(self) -> str:
        return self.imported.output_name


def compile_imported(imported: Imported, cfg: VTAConfig, profile: Profile | None = None,
                     vk_name: str = "model.vk") -> CompiledModel:
    """Compile an imported model's kernel-language text with its weights packed into the program."""
    checked = check_source(imported.source, vk_name)
    return CompiledModel(imported, compile_file(checked, cfg, "main", profile, params=imported.params), vk_name)


def compile_model(path: str | Path, cfg: VTAConfig, calibration: str | Path | np.ndarray | None = None,
                  profile: Profile | None = None,
                  input_shapes: dict[str, tuple[int, ...]] | None = None) -> CompiledModel:
    """Import an ONNX model (quantised with ``calibration``, open input dimensions fixed by ``input_shapes``)
    and compile it for ``cfg``."""
    imported = import_model(path, calibration, input_shapes)
    return compile_imported(imported, cfg, profile, Path(path).with_suffix(".vk").name)
