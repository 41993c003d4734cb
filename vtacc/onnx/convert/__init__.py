"""ONNX nodes into float layers: one converter per operator, VTA-sized layers or host nodes."""
