"""What a run reads and writes outside the machine: input tensors, DRAM ranges and result files, and
execution traces in the runtime's format or as JSON lines."""
