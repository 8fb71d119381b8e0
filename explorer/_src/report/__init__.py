"""The Report and what turns a worker's raw texts into one: build, predict, compare,
summary. Pure; imports spec, hlo, cost; no jax.
"""
