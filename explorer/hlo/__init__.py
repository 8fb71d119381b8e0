"""Pure readers of XLA HLO text: modules, shardings, replica groups, collective kinds, schedules.
Imports explorer.spec and explorer.errors; no jax.
"""
