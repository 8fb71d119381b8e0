"""Strategies: logical-axis rules, the preset catalog, and the plan that turns them
into per-tensor specs. Imports spec and workloads.base; no jax.
"""
