"""Strategy search: the shardings of a program ranked by their predicted step time on a target.

Its public names (`search`, `largest_batch`, their result types and enums) are re-exported by
`explorer`. The package is named apart from the function, so that `explorer.search` is the
function and `explorer._src.layout_search` this package.

Owns the search space (mesh factorisations, logical-axis rule tables, per-tensor specs and
their equivalences: space.py), the analytical bounds that skip candidates without compiling
them (bounds.py), the model that orders the compiles (surrogate.py), the evaluation of one
candidate, an explorer Request of its own, by the real compiler, in this process's worker pool
or as a Ray task on a cluster (evaluate.py, cluster.py), the search's options beside the Request
it searches (options.py), the state of a running search (state.py), the branch and bound of
the rules and specs spaces (branch_and_bound.py), the pipeline stage construction by dynamic
programming (pipeline.py) and its search (pipeline_search.py), the ranked result with its
Pareto front and the comparison of the winner with the runner-up (result.py, ranking.py), and
`search` itself, which makes the Request of its arguments, or takes one, and runs one of the
two (search.py).

Imports the api stage (the Request, analyze, analyze_workload, the request checks) and
everything below it; never the UI. No jax: programs are traced by the api's Requests and
compiled by its workers (numpy for the surrogate's regression). Ray is imported only when a
search is sent to a cluster (the optional `cluster` extra).
"""
