"""The hardware catalog (catalog/), the mapping of mesh axes onto its links (mapping.py),
and the time formulas, roofline, memory fit and step Estimate (model.py).
Pure numbers; imports explorer._src.spec and explorer._src.hlo (collective kinds, a schedule's
Work); no jax.
"""
