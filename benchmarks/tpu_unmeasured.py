"""Programs of kinds the cost model has not been held against, predicted and measured on a chip.

    python benchmarks/tpu_unmeasured.py --out DIR [--only NAME ...] [--no-hlo] [--more|--census]

Each program is given to `explorer.analyze(fn, *args, mesh="data=1", target="tpu-v5e-1x1",
measure=True)` on a machine with one TPU v5e chip, as a TPU-VM user would: the explorer compiles
and runs it on the chip and prices the same compiled program. Writes DIR/unmeasured.json (per
program: the predicted step, its range and cautions where the explorer gives them, the measured
step, each instruction's predicted and measured time) and DIR/NAME.hlo.txt.gz, the optimized
HLO the chip ran, so that the range can be priced again with no chip
(docs/cost-model.md, "Provenance and ranges").

The programs: Pallas kernels (jax's TPU flash attention at a shape and mask other than the one
measured before, and its blocked matmul, a kernel never measured), an embedding gradient's
scatter-add, and kinds never measured on the chip (a sort, a cumulative sum, a top-k).
Integer inputs are random 0 or 1, so a scatter's rows pile onto two rows. With --more, other
kinds instead (`more_programs`), their HLO in one DIR/hlo.tar.gz. With --census, the kinds
benchmarks/kind_census.py found in real models' steps that no chip had measured (integer bit
operations, top-k, sort, a one-hot matmul), each across a few shapes, and three of the census's
programs cut to one chip (`census_programs`). DIR/unmeasured.json is written again after each
program, so a run the chip's lending cuts short keeps what it measured.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import os
import sys
import tarfile
import time
import traceback


def programs():
    import jax
    import jax.numpy as jnp

    bf16, f32, i32 = jnp.bfloat16, jnp.float32, jnp.int32

    def sds(shape, dtype):
        return jax.ShapeDtypeStruct(tuple(shape), dtype)

    def flash(causal):
        def attention(q, k, v):
            from jax.experimental.pallas.ops.tpu.flash_attention import flash_attention
            return flash_attention(q, k, v, causal=causal, sm_scale=1 / math.sqrt(128))
        return attention

    def pallas_matmul(a, b):
        from jax.experimental.pallas.ops.tpu.matmul import matmul
        return matmul(a, b, block_shape=(512, 512))

    def embedding_grad(table, ids, g):
        return jnp.zeros_like(table).at[ids].add(g)

    qkv = sds((2, 8, 8192, 128), bf16)
    qkv4 = sds((4, 16, 4096, 128), bf16)
    return [
        ("flash_causal_4k", flash(True), (qkv4, qkv4, qkv4)),
        ("flash_causal_8k", flash(True), (qkv, qkv, qkv)),
        ("flash_full_4k", flash(False), (qkv4, qkv4, qkv4)),
        ("pallas_matmul_4096", pallas_matmul, (sds((4096, 4096), bf16), sds((4096, 4096), bf16))),
        ("embedding_scatter_add", embedding_grad,
         (sds((32000, 1024), f32), sds((16384,), i32), sds((16384, 1024), f32))),
        ("sort_16m", lambda x: jnp.sort(x), (sds((1 << 24,), f32),)),
        ("cumsum_rows", lambda x: jnp.cumsum(x, axis=1), (sds((4096, 8192), f32),)),
        ("top_k_rows", lambda x: jax.lax.top_k(x, 64)[0], (sds((8192, 32000), f32),)),
    ]


def more_programs():
    """Kinds none of the coverage table's entries came from: an FFT, a Cholesky factorisation,
    a triangular solve, a searchsorted, an argsort, a segment sum, random numbers, a gather of
    rows, and a loop of a thousand small in-place updates."""
    import jax
    import jax.numpy as jnp

    f32, i32 = jnp.float32, jnp.int32

    def sds(shape, dtype):
        return jax.ShapeDtypeStruct(tuple(shape), dtype)

    def spd(a):
        return a @ a.T + 4096 * jnp.eye(a.shape[0], dtype=a.dtype)

    def decode_loop(cache, x):
        def body(i, c):
            return jax.lax.dynamic_update_slice(c, x[None] * i.astype(f32), (i, 0))
        return jax.lax.fori_loop(0, 1024, body, cache)

    return [
        ("fft_rows", lambda x: jnp.abs(jnp.fft.fft(x.astype(jnp.complex64), axis=-1)),
         (sds((4096, 4096), f32),)),
        ("cholesky_4096", lambda a: jnp.linalg.cholesky(spd(a)), (sds((4096, 4096), f32),)),
        ("triangular_solve", lambda a, b: jax.scipy.linalg.solve_triangular(
            jnp.tril(a) + 4096 * jnp.eye(4096, dtype=f32), b, lower=True),
         (sds((4096, 4096), f32), sds((4096, 1024), f32))),
        ("searchsorted_1m", lambda s, q: jnp.searchsorted(jnp.sort(s), q),
         (sds((1 << 20,), f32), sds((1 << 20,), f32))),
        ("argsort_4m", lambda x: jnp.argsort(x), (sds((1 << 22,), f32),)),
        ("segment_sum", lambda d, ids: jax.ops.segment_sum(d, ids, num_segments=4096),
         (sds((1 << 20, 64), f32), sds((1 << 20,), i32))),
        ("random_normal", lambda k: jax.random.normal(jax.random.wrap_key_data(k), (8192, 8192)),
         (sds((2,), jnp.uint32),)),
        ("gather_rows", lambda t, ids: jnp.take(t, ids, axis=0),
         (sds((32000, 1024), f32), sds((65536,), i32))),
        ("small_updates_loop", decode_loop, (sds((1024, 256), f32), sds((256,), f32))),
    ]


def census_programs():
    """The census's never-measured kinds across shapes, and its programs on one chip.

    Integer bit operations: a random-number generator's threefry (`jax.random.bits`, uniform
    and normal numbers, a dropout mask) at 16M to 64M elements. Top-k: sampling's
    `lax.top_k` over vocabularies of 32,000 and 128,256, k of 8 to 64. Sort: 1M to 16M keys,
    f32 and bf16, along rows and whole. A one-hot matmul (`one_hot(ids) @ table`), which the
    model now reads in the table's dtype. Then the census's decode step with top-k sampling,
    its embedding gradient, and a plain-jax CNN train step, each on one chip."""
    import jax
    import jax.numpy as jnp

    bf16, f32, i32, u32 = jnp.bfloat16, jnp.float32, jnp.int32, jnp.uint32

    def sds(shape, dtype):
        return jax.ShapeDtypeStruct(tuple(shape), dtype)

    def key_of(k):
        return jax.random.wrap_key_data(k)

    key = sds((2,), u32)

    def dropout(k, x):
        keep = jax.random.bernoulli(key_of(k), 0.9, x.shape)
        return jnp.where(keep, x / 0.9, 0).astype(x.dtype)

    def one_hot_matmul(ids, table):
        return jax.nn.one_hot(ids, table.shape[0], dtype=table.dtype) @ table

    layers, batch, heads, d_head, d_model, cache_len, vocab = 4, 32, 16, 128, 2048, 4096, 32000

    def decode(params, cache_k, cache_v, token, pos, k):
        x = params["embed"][token]
        for i in range(layers):
            q = jnp.einsum("bd,dhk->bhk", x, params["wq"][i])
            kk = jnp.einsum("bd,dhk->bhk", x, params["wk"][i])
            v = jnp.einsum("bd,dhk->bhk", x, params["wv"][i])
            cache_k = jax.lax.dynamic_update_slice(cache_k, kk[None, :, None], (i, 0, pos, 0, 0))
            cache_v = jax.lax.dynamic_update_slice(cache_v, v[None, :, None], (i, 0, pos, 0, 0))
            s = jnp.einsum("bhk,bthk->bht", q, cache_k[i]) / jnp.sqrt(d_head).astype(x.dtype)
            s = jnp.where(jnp.arange(cache_len) <= pos, s, -1e30)
            a = jnp.einsum("bht,bthk->bhk", jax.nn.softmax(s.astype(f32), axis=-1).astype(x.dtype),
                           cache_v[i])
            x = x + jnp.einsum("bhk,hkd->bd", a, params["wo"][i])
        logits = (x @ params["embed"].T).astype(f32)
        top, idx = jax.lax.top_k(logits, 40)
        choice = jax.random.categorical(key_of(k), top)
        nxt = jnp.take_along_axis(idx, choice[:, None], axis=1)[:, 0]
        return nxt, cache_k, cache_v

    decode_params = {"embed": sds((vocab, d_model), bf16),
                     "wq": sds((layers, d_model, heads, d_head), bf16),
                     "wk": sds((layers, d_model, heads, d_head), bf16),
                     "wv": sds((layers, d_model, heads, d_head), bf16),
                     "wo": sds((layers, heads, d_head, d_model), bf16)}
    cache = sds((layers, batch, cache_len, heads, d_head), bf16)

    def embedding_grad(embed, w, tokens):
        def loss(e, w):
            return jnp.mean((e[tokens] @ w).astype(f32) ** 2)
        g_e, g_w = jax.grad(loss, argnums=(0, 1))(embed, w)
        return embed - 1e-3 * g_e, w - 1e-3 * g_w

    def cnn_train(params, images, labels):
        # Flax's MNIST CNN written in plain jax: two 3x3 convolutions with average pools, two
        # dense layers, softmax cross-entropy, one SGD step.
        def net(p, x):
            dn = ("NHWC", "HWIO", "NHWC")
            x = jax.nn.relu(jax.lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME",
                                                         dimension_numbers=dn))
            x = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
            x = jax.nn.relu(jax.lax.conv_general_dilated(x, p["c2"], (1, 1), "SAME",
                                                         dimension_numbers=dn))
            x = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
            x = jax.nn.relu(x.reshape(x.shape[0], -1) @ p["d1"])
            return x @ p["d2"]

        def loss(p):
            logits = net(p, images)
            return -jnp.mean(jnp.sum(jax.nn.one_hot(labels, 10) * jax.nn.log_softmax(logits),
                                     axis=-1))
        g = jax.grad(loss)(params)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, g)

    cnn_params = {"c1": sds((3, 3, 1, 32), f32), "c2": sds((3, 3, 32, 64), f32),
                  "d1": sds((7 * 7 * 64, 256), f32), "d2": sds((256, 10), f32)}

    return [
        ("bits_16m", lambda k: jax.random.bits(key_of(k), (4096, 4096)), (key,)),
        ("bits_64m", lambda k: jax.random.bits(key_of(k), (8192, 8192)), (key,)),
        ("uniform_32m", lambda k: jax.random.uniform(key_of(k), (8192, 4096)), (key,)),
        ("normal_bf16_32m", lambda k: jax.random.normal(key_of(k), (8192, 4096), bf16), (key,)),
        ("dropout_bf16", dropout, (key, sds((8192, 4096), bf16))),
        ("top_k_decode", lambda x: jax.lax.top_k(x, 40), (sds((32, 32000), f32),)),
        ("top_k_128k_vocab", lambda x: jax.lax.top_k(x, 40), (sds((256, 128256), f32),)),
        ("top_k_8_rows", lambda x: jax.lax.top_k(x, 8), (sds((8192, 32000), bf16),)),
        ("top_k_64_rows", lambda x: jax.lax.top_k(x, 64), (sds((2048, 32000), f32),)),
        ("sort_1m", lambda x: jnp.sort(x), (sds((1 << 20,), f32),)),
        ("sort_4m_bf16", lambda x: jnp.sort(x), (sds((1 << 22,), bf16),)),
        ("sort_rows", lambda x: jnp.sort(x, axis=-1), (sds((4096, 1024), f32),)),
        ("sort_rows_long", lambda x: jnp.sort(x, axis=-1), (sds((256, 32768), f32),)),
        ("one_hot_matmul_8k", one_hot_matmul, (sds((8192,), i32), sds((32000, 2048), bf16))),
        ("one_hot_matmul_16k", one_hot_matmul, (sds((16384,), i32), sds((32000, 4096), bf16))),
        ("census_decode", decode, (decode_params, cache, cache, sds((batch,), i32),
                                   sds((), i32), key)),
        ("census_embedding_grad", embedding_grad,
         (sds((32000, 2048), bf16), sds((2048, 2048), bf16), sds((16, 1024), i32))),
        ("census_cnn_train", cnn_train, (cnn_params, sds((256, 28, 28, 1), f32),
                                         sds((256,), i32))),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--no-hlo", action="store_true", help="keep no HLO files")
    ap.add_argument("--more", action="store_true", help="more_programs, HLO in one tar")
    ap.add_argument("--census", action="store_true", help="census_programs")
    args = ap.parse_args()
    tar = tarfile.open(os.path.join(args.out, "hlo.tar.gz"), "w:gz") if args.more else None

    import explorer
    from explorer._src.report.op_comparison import compare_ops, comparison_lines

    rows = []
    chosen = more_programs() if args.more else census_programs() if args.census else programs()
    for name, fn, shapes in chosen:
        if args.only and name not in args.only:
            continue
        t0 = time.perf_counter()
        try:
            report = explorer.analyze(fn, *shapes, mesh="data=1", target="tpu-v5e-1x1",
                                      measure=True)
        except Exception as e:  # noqa: BLE001 - a check on a machine records what failed
            rows.append({"name": name, "error": repr(e)[:2000],
                         "traceback": traceback.format_exc()[-3000:]})
            print(name, "failed:", repr(e)[:500], flush=True)
            continue
        est, t = report.estimate, report.timing
        rng = getattr(est, "step_range", None) if est else None
        ops: dict[str, float] = {}
        for e in report.trace.events if report.trace is not None else ():
            ops[e.hlo] = ops.get(e.hlo, 0.0) + e.duration
        row = {"name": name, "seconds": time.perf_counter() - t0,
               "device_kind": report.device_kind, "ahead_of_time": report.ahead_of_time,
               "predicted_s": est.step_trace_seconds if est else None,
               "range": rng.to_dict() if rng is not None else None,
               "cautions": list(est.cautions) if est else [],
               "measured_device_s": t.measured_device_s, "measured_s": t.measured_s,
               "measure_note": t.measure_note, "measured_ops": dict(t.measured_ops),
               "predicted_ops": ops, "estimate_text": est.text() if est else None}
        cmp = compare_ops(report)
        row["comparison"] = comparison_lines(cmp) if cmp is not None else None
        rows.append(row)
        if tar is not None:
            data = report.optimized_hlo.encode()
            info = tarfile.TarInfo(f"{name}.hlo.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        elif not args.no_hlo:
            with gzip.open(os.path.join(args.out, f"{name}.hlo.txt.gz"), "wt") as f:
                f.write(report.optimized_hlo)
        with open(os.path.join(args.out, "unmeasured.json"), "w") as f:
            json.dump(rows, f, indent=1)
        print(f"== {name}: predicted {row['predicted_s']}, measured {t.measured_device_s}, "
              f"{len(row['cautions'])} caution(s)", flush=True)
        print("\n".join(line for line in (row["estimate_text"] or "").splitlines()
                        if line.startswith(("range", "caution"))), flush=True)
        print("\n".join(row["comparison"] or []), flush=True)
    if tar is not None:
        tar.close()
    with open(os.path.join(args.out, "unmeasured.json"), "w") as f:
        json.dump(rows, f, indent=1)
    explorer._src.compile.pool.default_pool().close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
