"""Pure readers of XLA HLO text: modules, shardings, replica groups, collective kinds, schedules
and the FLOPs and bytes of their instructions.
Imports explorer.spec and explorer.errors; no jax.
"""
