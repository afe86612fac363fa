"""The reference executor: the graph interpreter (executor), one module per NNAPI operation or
tight family (ops/), the arithmetic they share (arith/) and the compiled kernels and memory
settings that make them fast without changing a bit of their results (kernels/).
"""
