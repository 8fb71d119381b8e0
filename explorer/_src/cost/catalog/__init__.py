"""The hardware catalog, as data: chips, their links, and the slices and nodes people rent.

Every number carries its unit and a public source. Where sources differ we say which one we took
and why. Nothing here computes a time; the formulas live in explorer/_src/cost/collectives.py,
compute.py and estimate.py, and docs/cost-model.md.

`types.py` holds the data classes (`Target`, `Chip`, `Link`, `PhysicalAxis`, `Measured`,
`VectorUnit`, `TargetFamily`, `LinkKind`) and `achievable` (a target at its measured rates);
`sources.py` the units the figures are written in and the sources they cite; `tpu.py` the TPU
generations and their slices; `gpu.py` the NVIDIA GPUs and their DGX nodes; `others.py`
Graphcore's Bow-2000 and the CPU host; `names.py` the target-name grammar and the lookups
(`targets`, `get_target`, `targets_with_chips`, `tpu_slices_of`, `compute_dtypes`). Import each
name from the module that defines it: this package re-exports nothing.
"""
