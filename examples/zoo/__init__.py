"""Model-zoo CNNs built as ONNX files with seeded random weights (see README.md)."""
