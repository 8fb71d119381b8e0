"""Pure readers of XLA HLO text: modules, shardings, replica groups, collective kinds, schedules
and the FLOPs and bytes of their instructions.
Imports explorer._src.spec and explorer._src.errors; no jax.
"""
