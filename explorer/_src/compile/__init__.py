"""Compile workers: the parent-side pool, the worker process, the jax compile, TPU topologies.
The only package that runs jax (inside the workers); imports explorer._src.spec.
"""
