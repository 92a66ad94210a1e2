"""The numerical core's shared modules: kernels, trends, optimisation, scores, memory estimates,
checks."""
