"""Why each collective exists: a reason code, one sentence, and the evidence it rests on.

Pure: text in, reason out. The reader maps each collective of the optimized module back to the
propagated module (the one the partitioner was given, with `sharding={...}` on its
instructions) through its metadata (op_name and source line), finds the instruction whose
partitioning needed it, and reads the shardings of that instruction and its operands:

- `partial-sum`: a dot contracts, or a reduce reduces, a dimension that is sharded over the
  collective's axes, so each device holds a partial result (the scaling book's sharded-matmul
  cases 2 and 3, https://jax-ml.github.io/scaling-book/sharding/);
- `gather-operand`: an operand is gathered because the computation that uses it needs it less
  sharded (FSDP weights before a matmul; the scaling book's case 4);
- `reshard`: the layout moves between producer and consumer (a sharding constraint, a
  shard_map's in_specs, or propagation meeting a conflict; the explorer's jit leaves output
  layouts to propagation, so an output spec never is the cause); where Shardy recorded where
  the two layouts came from (explorer/_src/report/origins.py), the sentence names both;
- `indexing`: a gather, scatter or dynamic slice along a sharded dimension, or a slice, pad or
  concatenate at fixed offsets along one (the parts of its result start on other devices than
  the elements they hold: jax.random.split's halves of a sharded array of counters);
- `explicit`: the program asked for it (psum, ppermute, all_to_all inside a shard_map);
- `unknown`: none of these is shown by the modules; the text says what was missing.

Nothing is guessed: a collective whose evidence does not fit a rule is `unknown`.

The package: `context.py` (the modules, indexed once, read-only, and their queries),
`targets.py` (what is explained, with its ranked anchors), `parts.py` (the parts of a
combined collective, and what names each where XLA's GPU combiners wrote no op_name), one
module per rule in `rules/` with the table of rules per collective kind, `text.py` (the
words of every sentence), `evidence.py` (the evidence, as text and as typed Operands, built
from the instructions a rule read), and `explain.py` (the driver). This module is its public face.
"""

from explorer._src.report.why.explain import explain_collectives
from explorer._src.report.why.layout import dim_axes, spec_text
from explorer._src.report.why.reason import Evidence, Operand, OperandRole, Reason, Why

__all__ = ["Evidence", "Operand", "OperandRole", "Reason", "Why", "dim_axes",
           "explain_collectives", "spec_text"]
