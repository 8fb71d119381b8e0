"""Which instruction of the propagated HLO module each value of Shardy's after-propagation
module became. Pure text reading.

Shardy prints its module without locations, and XLA names the instructions it exports from
the op's jax name, so neither side names the other. The two are the same dataflow graph,
though: XLA exports each op as one instruction with its operands in order. So the match walks
both graphs back from where they are known to agree (the function's arguments are the entry's
parameters by number, its returned values the root's operands), pairing each op with the
instruction whose opcode and shape agree, and their operands in order. Where the export
differs it is bridged:
- a copy or a `Sharding` custom call on the HLO side only (a constraint's or an input's copy),
  or a tuple taken apart at once (a root whose layout changes), is stepped over, and a Shardy
  `reshard` with no instruction of its own likewise;
- an op with several results is reached through `get-tuple-element`;
- a `while` carries its operands in a tuple, its body reads them through `get-tuple-element`
  of its parameter, and a value the body takes from outside is an extra element of the tuple;
- a shard_map is a `SPMDShardToFullShape` custom call over a call of its body, over a
  `SPMDFullToShardShape` custom call of each operand.
Values whose op has no counterpart are left unmatched (never guessed).
"""

from __future__ import annotations

from collections.abc import Mapping

from explorer._src.hlo.mlir import Function, Op, Value
from explorer._src.hlo.module import HloModule, Instruction, ints

# Shardy op names whose HLO opcode is not the name with `_` written `-`.
_OPCODE = {
    "dot_general": "dot", "dot": "dot", "broadcast_in_dim": "broadcast",
    "optimization_barrier": "opt-barrier", "if": "conditional", "case": "conditional",
    "reshard": "copy", "sharding_constraint": "copy", "manual_computation": "custom-call",
    "return": "tuple",
}
# HLO instructions the export may add around a value, which keep it as it is.
_SPMD_SHAPES = ("SPMDFullToShardShape", "SPMDShardToFullShape")


def _opcode(op: Op) -> str:
    short = op.short
    return _OPCODE.get(short, short.replace("_", "-"))


def _stepped_over(h: Instruction) -> bool:
    """An instruction that only passes one operand on (a copy, a Sharding custom call)."""
    if len(h.operands) != 1:
        return False
    return h.opcode in ("copy", "bitcast") or (h.opcode == "custom-call"
                                                and h.custom_call_target == "Sharding")


def _same_shape(v: Value, h: Instruction) -> bool:
    arrays = h.arrays
    if v.dims is None or len(arrays) != 1 or h.shape.startswith("("):
        return v.dims is None
    return arrays[0].dims == v.dims


class _Matcher:
    def __init__(self, fn: Function, module: HloModule):
        self.fn = fn
        self.module = module
        self.names = module.by_name()
        self.values: dict[int, Instruction] = {}       # id(Value) -> instruction
        self.by_instr: dict[str, Value] = {}           # instruction name -> Value
        self.ops: dict[int, Instruction] = {}          # id(Op) -> instruction
        self.matched_ops: dict[str, Op] = {}           # instruction name -> Op
        # A while body's parameter -> the tuple the while starts from.
        self.loop_inits: dict[str, Instruction] = {}
        self.todo: list[tuple[Value, Instruction]] = []

    # -- bookkeeping -------------------------------------------------------------------------

    def _bind(self, v: Value, h: Instruction) -> None:
        self.values[id(v)] = h
        self.by_instr.setdefault(h.name, v)

    def _bind_op(self, op: Op, h: Instruction) -> None:
        self.ops[id(op)] = h
        self.matched_ops.setdefault(h.name, op)

    def _operand(self, h: Instruction, k: int) -> Instruction | None:
        return self.names.get(h.operands[k]) if k < len(h.operands) else None

    def _passed_on(self, h: Instruction) -> Instruction | None:
        """What `h` only passes on: a copy's operand, or element k of a tuple that
        `get-tuple-element(index=k)` takes apart at once (XLA's wrapping of a root whose
        layout changes); None when `h` computes something."""
        if _stepped_over(h):
            return self._operand(h, 0)
        if h.opcode == "get-tuple-element":
            base = self._operand(h, 0)
            index = ints(h.attr("index"))
            if base is not None and base.opcode == "tuple" and index:
                return self._operand(base, index[0])
        return None

    def _through_copies(self, h: Instruction | None) -> Instruction | None:
        for _ in range(8):
            passed = self._passed_on(h) if h is not None else None
            if passed is None:
                return h
            h = passed
        return h

    # -- the walk ----------------------------------------------------------------------------

    def run(self) -> None:
        entry = self.module.computations.get(self.module.entry, [])
        params = {}
        for h in entry:
            if h.opcode == "parameter":
                number = ints(h.operand_text)
                if number:
                    params[number[0]] = h
        for k, arg in enumerate(self.fn.arguments):
            if k in params:
                self._bind(arg, params[k])
        roots = [h for h in entry if h.is_root]
        if not roots:
            return
        root = roots[0]
        returned = self.fn.returned
        if root.opcode == "tuple" and (len(returned) != 1 or len(root.operands) == 1):
            outs = [self._operand(root, k) for k in range(len(root.operands))]
        else:
            outs = [root]
        if len(outs) == len(returned):
            self.todo += [(v, h) for v, h in zip(returned, outs, strict=True) if h is not None]
        while self.todo:
            v, h = self.todo.pop()
            if id(v) not in self.values:
                self._visit(v, h)

    def _visit(self, v: Value, h: Instruction) -> None:
        if v.is_argument:
            return
        if v.owner is not None:          # a region's block argument
            if h.opcode in ("get-tuple-element", "parameter"):
                self._bind(v, h)
            return
        h = self._from_outside(v, h)
        if h is None:
            return
        op = v.op
        if len(op.results) > 1 or op.short in ("while", "optimization_barrier"):
            self._multi(v, op, h)
            return
        if op.short == "manual_computation":
            self._shard_map(v, op, h)
            return
        found = self._compatible(op, v, h)
        if found is None:
            if op.short in ("reshard", "sharding_constraint") and op.operands:
                self.todo.append((op.operands[0], h))      # exported as nothing
            return
        self._bind(v, found)
        self._bind_op(op, found)
        self._pair_operands(op, found)

    def _compatible(self, op: Op, v: Value | None, h: Instruction) -> Instruction | None:
        """`h`, or what it passes on, when its opcode and shape are the op's."""
        want = _opcode(op)
        for _ in range(8):
            if h is None:
                return None
            if h.opcode == want and (v is None or _same_shape(v, h)):
                if want != "custom-call" or op.short == "custom_call" or \
                        h.custom_call_target == "Sharding":
                    return h
            if want == "copy" and h.opcode == "custom-call" and h.custom_call_target == "Sharding":
                return h
            h = self._passed_on(h)
        return None

    def _pair_operands(self, op: Op, h: Instruction) -> None:
        if len(op.operands) != len(h.operands):
            return
        for k, operand in enumerate(op.operands):
            o = self._operand(h, k)
            if o is not None:
                self.todo.append((operand, o))

    def _from_outside(self, v: Value, h: Instruction) -> Instruction | None:
        """Inside a while body, a value from outside is element k of the body's parameter:
        the same value as element k of the tuple the while starts from."""
        for _ in range(8):
            if h.opcode != "get-tuple-element":
                return h
            base = self._operand(h, 0)
            if base is None or base.opcode != "parameter" or base.name not in self.loop_inits:
                return h
            index = ints(h.attr("index"))
            init = self.loop_inits[base.name]
            if not index or index[0] >= len(init.operands):
                return None
            h = self._operand(init, index[0])
            if h is None:
                return None
        return h

    def _multi(self, v: Value, op: Op, h: Instruction) -> None:
        """A result of an op with several results: `get-tuple-element(op, index=k)`."""
        h = self._through_copies(h)
        if h is None or h.opcode != "get-tuple-element":
            return
        base = self._through_copies(self._operand(h, 0))
        if base is None or base.opcode != _opcode(op):
            return
        index = ints(h.attr("index"))
        if not index or index[0] != v.index:
            return
        self._bind(v, h)
        if id(op) in self.ops:
            return
        self._bind_op(op, base)
        if op.short == "while":
            self._loop(op, base)
        else:
            self._pair_operands(op, base)

    def _loop(self, op: Op, h: Instruction) -> None:
        init = self._through_copies(self._operand(h, 0))
        if init is None or init.opcode != "tuple":
            return
        for k, operand in enumerate(op.operands):
            o = self._operand(init, k)
            if o is not None:
                self.todo.append((operand, o))
        for key, region in (("condition", 0), ("body", 1)):
            body = self.module.computations.get(h.callee(key), [])
            params = [i for i in body if i.opcode == "parameter"]
            if len(params) == 1:
                self.loop_inits[params[0].name] = init
            root = next((i for i in body if i.is_root), None)
            ret = op.terminator(region)
            if root is None or ret is None:
                continue
            if key == "condition":
                if len(ret.operands) == 1:
                    self.todo.append((ret.operands[0], root))
            elif root.opcode == "tuple":
                for k, value in enumerate(ret.operands):
                    o = self._operand(root, k)
                    if o is not None:
                        self.todo.append((value, o))

    def _shard_map(self, v: Value, op: Op, h: Instruction) -> None:
        """A shard_map's result: a ShardToFull custom call (through copies and the tuple of a
        call with several results), over a call of its body, over a FullToShard of each
        operand."""
        h = self._through_copies(h)
        if h is None or h.opcode != "custom-call" or h.custom_call_target != _SPMD_SHAPES[1]:
            return
        self._bind(v, h)
        if id(op) in self.ops:
            return
        self._bind_op(op, h)
        call = self._operand(h, 0)
        for _ in range(8):
            if call is None or call.opcode == "call":
                break
            call = self._operand(call, 0) if call.opcode in ("copy", "get-tuple-element") \
                else None
        if call is None or len(call.operands) != len(op.operands):
            return
        for k, operand in enumerate(op.operands):
            full = self._through_copies(self._operand(call, k))
            if full is not None and full.opcode == "custom-call" and \
                    full.custom_call_target == _SPMD_SHAPES[0]:
                o = self._operand(full, 0)
                if o is not None:
                    self.todo.append((operand, o))


def match_values(fn: Function, module: HloModule) -> tuple[Mapping[int, Instruction],
                                                           Mapping[int, Instruction]]:
    """(id of each matched Value -> its instruction, id of each matched Op -> its
    instruction). A value the walk could not pair is absent."""
    m = _Matcher(fn, module)
    m.run()
    return m.values, m.ops
