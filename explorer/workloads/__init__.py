"""Built-in workloads: the Workload definition, the registry, one module per model.
Imports explorer.spec; their functions use jax only when a request traces them
(explorer/compile/lowering.py).
"""
