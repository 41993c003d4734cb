"""The functional machine: its state, the GEMM, ALU and DMA units, the pipeline and its tokens, the two ways
of running a program (stage by stage, or in program order), faults and the reference's counters."""
