"""Strategy presets: the parallelism schemes of the large-model literature as logical-axis rules.

A preset is a rule table (see _rules.py) plus the mesh axes it expects. Axes are named `data`,
`model`, `expert` and `stage`. A preset *requires* some axes (an error names the missing one) and
may use *optional* ones when the mesh has them (`megatron` adds data parallelism when the mesh
has a `data` axis). docs/strategies.md explains each preset, the collectives it should cost and
where the compiler differs.

`plan()` turns a preset, user rules, per-tensor specs and activation specs into the specs of
every input tensor and the constraint table of the program: per-tensor specs win over rules, and
activation specs win over rules for constraint points.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer._src.errors import PresetError, choices
from explorer._src.spec.bounds import show
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import (
    entry_axes,
)
from explorer._src.strategy.rules import Rule, Rules, parse_rules


@dataclass(frozen=True)
class Preset:
    """A parallelism scheme of the literature as logical-axis rules, and the mesh axes it expects.

    explorer.PRESETS lists them by name; analyze_workload's ``preset=`` applies one.

    Attributes:
        name: the key in explorer.PRESETS, e.g. ``"megatron"``.
        title: the scheme's name in words.
        source: the paper or public document it comes from.
        rules: its rule table as text (``batch=data,mlp=model,...``).
        requires: the mesh axes it needs; a PresetError names a missing one.
        optional: the mesh axes it uses when the mesh has them (its rules over a missing one
            are dropped).
        workloads: the workloads it applies to; None for any.
        expects: the collectives the literature predicts for it.
    """

    name: str
    title: str
    source: str                       # the paper or public doc it comes from
    rules: str                        # rule text; see _rules.py
    requires: tuple[str, ...]         # mesh axes it needs
    optional: tuple[str, ...] = ()    # mesh axes it uses when the mesh has them
    workloads: tuple[str, ...] | None = None   # the workloads it applies to; None: any
    expects: str = ""                 # the collectives the literature predicts

    def rules_for(self, mesh: MeshSpec) -> Rules:
        """The rule table on `mesh`: required axes checked, missing optional axes dropped."""
        missing = [a for a in self.requires if a not in mesh.shape]
        if missing:
            axis = missing[0]
            optional = f" (and optionally {choices(self.optional)})" if self.optional else ""
            raise PresetError(
                f"preset {self.name!r} places tensors over mesh axes {choices(self.requires)}"
                f"{optional}, but mesh {mesh.text()!r} has no axis {axis!r}; name a mesh axis "
                f"{axis!r}, e.g. mesh {_example_mesh(self)!r}", axis=axis, mesh=mesh)
        out = []
        for r in parse_rules(self.rules).rules:
            axes = tuple(a for a in entry_axes(r.entry) if a in mesh.shape)
            out.append(Rule(r.kind, r.name, None if not axes else
                            axes[0] if len(axes) == 1 else axes))
        return Rules(tuple(out))

    def to_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "source": self.source,
                "rules": self.rules, "requires": list(self.requires),
                "optional": list(self.optional),
                "workloads": None if self.workloads is None else list(self.workloads),
                "expects": self.expects}


def _example_mesh(p: Preset) -> str:
    sizes = {1: (8,), 2: (2, 4), 3: (2, 2, 2)}[min(3, max(1, len(p.requires)))]
    return ",".join(f"{a}={s}" for a, s in zip(p.requires, sizes, strict=False))


_ZERO = "Rajbhandari et al. 2020, ZeRO (arXiv:1910.02054) §5; DeepSpeed ZeRO docs"
_MEGATRON = "Shoeybi et al. 2019, Megatron-LM (arXiv:1909.08053) §3"

PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("dp", "data parallel", "Sergeev & Del Balso 2018, Horovod (arXiv:1802.05799): ring "
           "all-reduce of the gradients", "batch=data", ("data",),
           expects="all-reduce of every gradient over data: V = params bytes"),
    Preset("zero1", "ZeRO stage 1: optimizer state sharded", _ZERO,
           "batch=data,opt:embed=data", ("data",),
           expects="gradients reduced over data, the updated params all-gathered over data"),
    Preset("zero2", "ZeRO stage 2: optimizer state and gradients sharded", _ZERO,
           "batch=data,opt:embed=data,grad:embed=data", ("data",),
           expects="gradients reduce-scattered over data, updated params all-gathered"),
    Preset("zero3", "ZeRO stage 3: params, gradients and optimizer state sharded", _ZERO,
           "batch=data,param:embed=data,grad:embed=data,opt:embed=data", ("data",),
           expects="params all-gathered over data before use (forward and backward), "
                   "gradients reduce-scattered"),
    Preset("fsdp", "fully sharded data parallel (= ZeRO-3)",
           "Zhao et al. 2023, PyTorch FSDP (arXiv:2304.11277); Xu et al. 2020 "
           "(arXiv:2004.13336), weight-update sharding",
           "batch=data,param:embed=data,grad:embed=data,opt:embed=data", ("data",),
           expects="as zero3"),
    Preset("megatron", "Megatron-LM tensor parallelism", _MEGATRON,
           "batch=data,heads=model,kv_heads=model,mlp=model,vocab=model", ("model",), ("data",),
           expects="one all-reduce over model after each attention and each MLP in the "
                   "forward pass: V = batch·seq·embed bytes"),
    Preset("megatron_sp", "Megatron tensor + sequence parallelism",
           "Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer "
           "Models (arXiv:2205.05198) §4.2.2",
           "batch=data,heads=model,kv_heads=model,mlp=model,vocab=model,act:seq=model,"
           "input:seq=model",
           ("model",), ("data",),
           expects="each all-reduce becomes a reduce-scatter over model after the block and "
                   "an all-gather over model before the next"),
    Preset("2d", "GSPMD 2-D sharding: weights over data×model, activations batch×embed",
           "Xu et al. 2021, GSPMD (arXiv:2105.04663), 2D sharding of the Transformer; as "
           "google/praxis LanguageModel.set_sharding_params_v1 writes it",
           "batch=data,heads=model,kv_heads=model,mlp=model,vocab=model,param:embed=data,"
           "grad:embed=data,opt:embed=data,act:embed=model,input:embed=model", ("data", "model"),
           expects="weights all-gathered over data; activations all-gathered / "
                   "reduce-scattered over model around each matmul"),
    Preset("fsdp_tp", "FSDP over data + tensor parallelism over model",
           "MaxText configs/base.yml logical_axis_rules (embed→fsdp, mlp/heads→tensor); "
           "PyTorch FSDP + tensor parallel (2-D) recipe",
           "batch=data,heads=model,kv_heads=model,mlp=model,vocab=model,param:embed=data,"
           "grad:embed=data,opt:embed=data", ("data", "model"),
           expects="params all-gathered over data; one all-reduce over model per attention "
                   "and per MLP"),
    Preset("ep", "expert parallelism",
           "Lepikhin et al. 2020, GShard (arXiv:2006.16668); Fedus et al. 2021, Switch "
           "Transformer (arXiv:2101.03961)",
           "experts=expert,batch=expert", ("expert",),
           expects="an all-to-all over expert to dispatch tokens to their experts and one "
                   "to bring them back: V = experts·batch·capacity·embed bytes / |expert|"),
    Preset("pp", "pipeline parallelism over stages",
           "Huang et al. 2019, GPipe (arXiv:1811.06965); Narayanan et al. 2021, PipeDream-"
           "Flush / 1F1B (arXiv:2104.04473)",
           "stage=stage,layers=stage,batch=data", ("stage",), ("data",),
           workloads=("pipeline",),
           expects="collective-permutes over stage carrying activations between stages"),
)}


def get_preset(name: str) -> Preset:
    """The preset called `name`, e.g. ``"zero3"``.

    Raises:
        PresetError: no preset has that name; the message lists them.
    """
    if not isinstance(name, str) or name not in PRESETS:
        raise PresetError(f"preset {show(name)} is unknown; choose one of {choices(PRESETS)}")
    return PRESETS[name]
