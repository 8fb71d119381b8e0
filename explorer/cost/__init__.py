"""The hardware catalog (catalog/), the mapping of mesh axes onto its links (mapping.py),
and the time formulas, roofline, memory fit and step Estimate (model.py).
Pure numbers; imports explorer.spec and explorer.hlo (collective kinds, a schedule's Work); no jax.
"""
