"""Built-in workloads: the Workload definition, the registry, one module per model.
Imports explorer.spec; their functions use jax only when the worker traces them.
"""
