"""The step a layout implies without a compile: a layout (a mesh, a PartitionSpec per input
and per named constraint point) carried through a program traced once
(explorer/_src/compile/jaxpr_graph.py) by GSPMD-like sharding propagation, into the collectives it
implies and the FLOPs and bytes each device works on (propagate.py). Plain data in and out, no
jax: the layout search calls it thousands of times, and the cost model prices what it gives.
"""
