"""From checked operators to the tiled schedule.

``operators`` turns checked assignments into producers (GEMM, pooling) with
element-wise epilogues (``epilogue``) over DRAM tensors (``layouts``);
``tiling`` chooses tile sizes, loop order and threads; ``scheduler`` (with
``convolution``, ``pooling``, ``kernels`` and ``dma``) writes the tiled
schedule as groups of steps (``steps``). It may import ``vtacc.frontend``,
vtasm and vtasim, never ``vtacc.backend`` or the driver.
"""
