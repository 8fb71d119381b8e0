"""The hardware catalog, the mapping of mesh axes onto links, and the time formulas.
Pure numbers; imports explorer.spec and explorer.hlo (collective kinds); no jax.
"""
