"""Reading an ONNX model: the file (wire, external data inside the model's folder), each node checked
against its schema (validate), shape arithmetic on constants folded away (fold), and the plain graph with
static shapes the converters take (graph)."""
