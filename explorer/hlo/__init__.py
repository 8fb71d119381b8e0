"""Pure readers of XLA HLO text: modules, shardings, replica groups, dataflow.
Imports explorer.spec and explorer.errors; no jax.
"""
