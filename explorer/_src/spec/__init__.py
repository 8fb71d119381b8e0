"""The request's vocabulary: meshes, tensor specs, dtypes, the text grammar, and the
geometry of a spec over a mesh. Imports only explorer._src.errors; no jax.
"""
