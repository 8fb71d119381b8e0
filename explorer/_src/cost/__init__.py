"""The hardware catalog (catalog/), the mapping of mesh axes onto its links (mapping.py),
the collective time formulas (collectives.py), the compute roofline (compute.py), the memory
fit (memory_fit.py), the step Estimate (estimate.py) and its cautions (cautions.py).
Pure numbers; imports explorer._src.spec and explorer._src.hlo (collective kinds, a schedule's
Work); no jax.
"""
