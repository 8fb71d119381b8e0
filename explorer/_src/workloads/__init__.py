"""Built-in workloads: the Workload definition, the registry, one module per model.
Imports explorer._src.spec; their functions use jax only when a request traces them
(explorer/_src/compile/lowering.py).
"""
