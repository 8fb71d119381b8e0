"""The bytes an instruction moves to and from memory, and those a transfer moves between host
memory and the device. explorer._src.hlo.schedule asks it for each Step's `bytes` and `written`.

Counting rules (docs/cost-model.md, "The predicted step trace"):

- every operand plus the result, as the instruction's shapes say (touched);
- a fusion: an operand its body only slices or gathers from counts as the slices or rows it
  reads, a buffer it updates in place as the update, an operand of a whole-row reduce-window
  twice (fusion_bytes, reread_bytes); what only a collective inside it reads or writes moves
  over the links in the collective's time (collective_only_bytes);
- a copy, slice or update between host memory and the device: its device side
  (host_transfer_bytes).
"""

from __future__ import annotations

from math import prod

from explorer._src.hlo.arithmetic import spans_a_dimension
from explorer._src.hlo.module import HOST_MEMORY_SPACE, Array, HloModule, Instruction


class Traffic:
    """The bytes each instruction of a module reads and writes."""

    def __init__(self, module: HloModule, names: dict[str, Instruction] | None = None):
        self.module = module
        self.names = module.by_name() if names is None else names

    def operand_spaces(self, instr: Instruction) -> tuple[tuple[Array, int], ...]:
        """The arrays of an instruction's operands, with their memory spaces."""
        return tuple(a for o in instr.operands if o in self.names
                     for a in self.names[o].memory_spaces)

    def operand_bytes(self, instr: Instruction) -> float:
        return float(sum(a.nbytes for o in instr.operands if o in self.names
                         for a in self.names[o].arrays))

    def touched(self, instr: Instruction) -> float:
        return self.operand_bytes(instr) + sum(a.nbytes for a in instr.arrays)

    def fusion_bytes(self, fusion: Instruction, called: str) -> float:
        """Operands + result, where an operand the body only slices counts as its slices
        (a loop body reading one layer of a stacked weight reads that layer, not the stack),
        and a buffer the body updates in place counts as the update (a loop body writing one
        layer's activations into the stack kept for the backward pass writes that layer)."""
        body = self.module.computations.get(called, [])
        users, params = _users(body), _params(body)
        updated = _in_place_updates(body, params)
        results = [a.nbytes for a in fusion.arrays]
        for part, fraction in updated.values():
            if part < len(results):
                results[part] *= fraction
        total = float(sum(results))
        for k, name in enumerate(fusion.operands):
            full = sum(a.nbytes for a in self.names[name].arrays) if name in self.names else 0
            used = users.get(params.get(k, ""), [])
            if k in updated:
                continue       # written in place where the result counts it; never read whole
            if k in params and not used:
                continue       # never read: a buffer the result aliases (TPU collective fusions)
            total += self.bytes_read(params[k], users, full) if used else full
        return total

    def written_bytes(self, instr: Instruction) -> float:
        """Bytes the instruction writes: its result; of a fusion's result, a buffer updated in
        place counts as its update (fusion_bytes)."""
        results = [a.nbytes for a in instr.arrays]
        if instr.opcode == "fusion":
            body = self.module.computations.get(instr.callee(), [])
            for part, fraction in _in_place_updates(body, _params(body)).values():
                if part < len(results):
                    results[part] *= fraction
        return float(sum(results))

    def reread_bytes(self, fusion: Instruction, called: str) -> float:
        """Bytes a fusion reads a second time: the operands of a reduce-window whose window
        spans a whole dimension (libtpu writes a softmax's row max and row sum so: each element
        gets the reduction of its whole row), which the fusion reads once for the reduction
        and again for the elementwise work that uses it. On a TPU v5e such fusions ran at 1.44
        to 1.48 times their bytes read once: four softmax probes (vector.json, softmax_*:
        4.69 ms for 2.15 GB f32, 2.36 ms for 1.07 GB bf16) and dot_product_attention's
        fusion.12 (18.6 ms for 8.6 GB) (benchmarks/results/tpu-v5e-2026-12-06); read twice,
        their bytes take 1.5 times as long. An operand counts once however many such
        reductions read it; it is matched by its element count."""
        sizes = {prod(w.arrays[0].dims) for w in self.whole_row_windows(called) if w.arrays}
        if not sizes:
            return 0.0
        total = 0.0
        for name in dict.fromkeys(fusion.operands):
            arrays = self.names[name].arrays if name in self.names else []
            if len(arrays) == 1 and prod(arrays[0].dims) in sizes:
                total += arrays[0].nbytes
        return total

    def whole_row_windows(self, computation: str, depth: int = 0) -> list[Instruction]:
        """The reduce-windows of a computation (nested fusions included) whose window spans a
        whole dimension of their operand: each output is the reduction of a whole row."""
        out = []
        for i in self.module.computations.get(computation, []):
            if i.opcode == "fusion" and depth < 8:
                out += self.whole_row_windows(i.callee(), depth + 1)
            elif i.opcode == "reduce-window" and spans_a_dimension(i, self.names):
                out.append(i)
        return out

    def bytes_read(self, param: str, users: dict[str, list[Instruction]], full: float,
                   depth: int = 0) -> float:
        """Bytes a computation reads of its parameter `param` (`full` bytes whole; `users`:
        the computation's _users): where it only slices it, the slices; where it gathers from
        it, the rows gathered (an embedding lookup reads its tokens' rows, not the table);
        through a nested fusion, what that fusion's body reads of it. Anything else reads it
        whole."""
        total = 0.0
        for u in users.get(param, []):
            if u.opcode in ("slice", "dynamic-slice", "gather") and u.operands[0] == param:
                total += sum(a.nbytes for a in u.arrays)
            elif u.opcode == "fusion" and depth < 8:
                inner = self.module.computations.get(u.callee(), [])
                inner_params, inner_users = _params(inner), _users(inner)
                total += sum(self.bytes_read(inner_params[k], inner_users, full, depth + 1)
                             for k, o in enumerate(u.operands) if o == param and k in inner_params)
            else:
                return full
            if total >= full:
                return full
        return total

    def collective_only_bytes(self, fusion: Instruction, called: str) -> float:
        """Bytes of a fusion's operands that only its collectives read, and of its result parts
        that its collectives produce."""
        body = self.module.computations.get(called, [])
        moved = {i.name for i in self.module.collectives.get(called, ())}
        users, params = _users(body), _params(body)
        total = 0.0
        for k, name in params.items():
            if users.get(name) and all(u.name in moved for u in users[name]) \
                    and k < len(fusion.operands) and fusion.operands[k] in self.names:
                total += sum(a.nbytes for a in self.names[fusion.operands[k]].arrays)
        root = next((i for i in body if i.is_root), None)
        if root is not None and root.opcode == "custom-call" and root.operands and all(
                o in moved or o in params.values() for o in root.operands):
            # The start of a TPU chain (explorer._src.hlo.chains): a custom call that hands on the
            # collective's buffers and flags, all of it the collective's.
            return total + sum(a.nbytes for a in fusion.arrays)
        parts = (root.operands if root is not None and root.opcode == "tuple"
                 else [root.name] if root is not None else [])
        for part, name in enumerate(parts):
            if name in moved and part < len(fusion.arrays):
                total += fusion.arrays[part].nbytes
        return total

    def root_bytes(self, computation: str) -> float:
        root = next((i for i in self.module.computations.get(computation, []) if i.is_root), None)
        return float(sum(a.nbytes for a in root.arrays)) if root else 0.0


def host_transfer_bytes(instr: Instruction,
                        operands: tuple[tuple[Array, int], ...] = ()) -> float:
    """Bytes an instruction moves between host memory (HOST_MEMORY_SPACE) and the device: the
    device side of it (the arrays of its shape, and `operands`, in any other memory space;
    scalars such as indices and sync flags left out), when some array of it is in host memory
    and some is not; else 0. A -start's shape holds both sides: (destination, source, flag),
    or a fusion's (operands, result, flag)."""
    arrays = [(a, space) for a, space in (*instr.memory_spaces, *operands) if a.dims]
    if not any(space == HOST_MEMORY_SPACE for _, space in arrays):
        return 0.0
    return float(sum(a.nbytes for a, space in arrays if space != HOST_MEMORY_SPACE))


def _users(body: list[Instruction]) -> dict[str, list[Instruction]]:
    """Name -> the instructions of `body` that read it."""
    users: dict[str, list[Instruction]] = {}
    for i in body:
        for o in i.operands:
            users.setdefault(o, []).append(i)
    return users


def _params(body: list[Instruction]) -> dict[int, str]:
    """Parameter number -> the name of the body's parameter instruction."""
    return {int(i.operand_text): i.name for i in body
            if i.opcode == "parameter" and i.operand_text.strip().isdigit()}


# Ops that pass a buffer on unchanged in size: a dynamic-update-slice seen through them still
# updates the buffer in place (the CPU backend wraps bf16 updates in converts).
_SAME_BUFFER = frozenset({"convert", "bitcast", "copy", "reshape"})


def _in_place_updates(body: list[Instruction], params: dict[int, str]
                      ) -> dict[int, tuple[int, float]]:
    """Fusion param index -> (result part, fraction rewritten) for each param that a
    dynamic-update-slice of the body updates and the body returns: the buffer aliases the
    result and only the update's share of it is written."""
    by_name = {i.name: i for i in body}
    root = next((i for i in body if i.is_root), None)
    if root is None:
        return {}
    parts = root.operands if root.opcode == "tuple" else [root.name]
    param_index = {name: k for k, name in params.items()}
    out: dict[int, tuple[int, float]] = {}
    for part, name in enumerate(parts):
        instr = by_name.get(name)
        while instr is not None and instr.opcode in _SAME_BUFFER and instr.operands:
            instr = by_name.get(instr.operands[0])
        if instr is None or instr.opcode != "dynamic-update-slice" or len(instr.operands) < 2:
            continue
        buffer, update = by_name.get(instr.operands[0]), by_name.get(instr.operands[1])
        while buffer is not None and buffer.opcode in _SAME_BUFFER and buffer.operands:
            buffer = by_name.get(buffer.operands[0])
        if buffer is None or buffer.name not in param_index or update is None:
            continue
        whole = prod(instr.arrays[0].dims) if instr.arrays else 0
        if whole:
            out[param_index[buffer.name]] = (part, prod(update.arrays[0].dims) / whole)
    return out
