"""ONNX models as the compiler's input: load, check, quantise for VTA, and write as kernel language."""
