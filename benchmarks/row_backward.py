"""The row kernels of a training step, forward and backward together: RMSNorm and LayerNorm
(`rms_norm_forward` + `rms_norm_backward`, ...), SwiGLU (`swiglu` + `swiglu_backward`),
cross-entropy with its gradient (`cross_entropy`, one pass, in place over the logits) and the
fused last layer with its cross-entropy (`linear_cross_entropy`), against Liger Kernel and
`torch.compile` of the eager code in one run, at the shapes of Llama training steps (hidden sizes
2048-8192, vocabularies 32000 and 128256).  Each contender's median over single launches after an
L2 flush, the median of that over 7 rounds in which they take turns in random order; TB/s = the
bytes a fused forward and backward must move / that time (TFLOP/s of the three GEMMs for the
fused last layer, with each contender's peak of memory allocated beyond its inputs); then each
contender's gradients against float64 autograd (largest error relative to the largest value).
Liger's fused linear cross-entropy sums its weight gradient in float32 here, as asyncdsl's does.

    python -m pip install --no-deps liger_kernel-0.8.5-py3-none-any.whl   # else Liger is left out
    python benchmarks/row_backward.py rms_norm    # or layer_norm, swiglu, cross_entropy,
                                                  # linear_cross_entropy; all of them by default
"""

from __future__ import annotations

import functools
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import rounds_of_gpu_ms, write_result  # noqa: E402

NORMS = ((16384, 2048), (16384, 4096), (8192, 8192))
SWIGLU = ((16384, 8192), (8192, 14336))
VOCABULARIES = ((8192, 32000), (4096, 128256))
LAST_LAYERS = ((8192, 2048, 32000), (8192, 4096, 128256))  # tokens, hidden size, vocabulary
# Bytes an element of the forward and backward together moves at least (bf16): the norms read x,
# write y, read dy and x, write dx; SwiGLU reads a and b, writes y, reads dy, a and b, writes da
# and db; cross-entropy reads the logits twice and writes their gradient.
BYTES = {"rms_norm": 10, "layer_norm": 10, "swiglu": 16, "cross_entropy": 6}


def _liger():
    """Liger Kernel's forwards (its functional API, with its defaults: the RMSNorm's backward
    writes dx over dy, the cross-entropy's gradient goes over the logits), or None where it does
    not import."""
    try:
        from liger_kernel.transformers import functional as liger
    except ImportError as error:
        print(f"Liger Kernel left out: {error}", flush=True)
        return None
    import torch

    return {"rms_norm": lambda x, w: liger.liger_rms_norm(x, w, 1e-6),
            "layer_norm": lambda x, w, b: liger.liger_layer_norm(x, w, b, 1e-5),
            "swiglu": liger.liger_swiglu, "cross_entropy": liger.liger_cross_entropy,
            "linear_cross_entropy": lambda h, w, t: liger.liger_fused_linear_cross_entropy(
                h, w, t, accum_dtype=torch.float32)}


def _eager(kind):
    """The eager torch forward that torch.compile compiles and float64 autograd checks (the
    statistics in float32 at least)."""
    import torch
    import torch.nn.functional as F

    def widened(x):
        return x.to(torch.promote_types(x.dtype, torch.float32))

    def rms_norm(x, w):
        wide = widened(x)
        return (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + 1e-6) * widened(w)).to(x.dtype)

    return {"rms_norm": rms_norm,
            "layer_norm": lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, 1e-5),
            "swiglu": lambda a, b: F.silu(a) * b,
            "cross_entropy": lambda z, t: F.cross_entropy(widened(z), t),
            "linear_cross_entropy": lambda h, w, t: F.cross_entropy(widened(h @ w.T), t)}[kind]


def _inputs(kind, m, n):
    """Random inputs (the leaves that take gradients) and the gradient flowing in."""
    import torch

    def rows(scale=1.0):
        return torch.randn(m, n, device="cuda").mul(scale).bfloat16()

    def vector():
        return torch.randn(n, device="cuda").bfloat16()

    if kind == "cross_entropy":
        targets = torch.randint(0, n, (m,), device="cuda")
        targets[::16] = -100
        return [rows(4.0)], targets, None
    leaves = {"rms_norm": lambda: [rows(3.0), vector()],
              "layer_norm": lambda: [rows(3.0), vector(), vector()],
              "swiglu": lambda: [rows(3.0), rows(3.0)]}[kind]()
    return leaves, None, rows()


def _contenders(kind, leaves, targets, dy, liger):
    """name -> a call that runs the forward and the backward, returning the gradients."""
    import torch

    import asyncdsl.kernels as K

    eager, compiled = _eager(kind), torch.compile(_eager(kind))

    def autograd(fn):
        """fn's forward and torch's backward through it, on leaves and a dy of its own (Liger
        overwrites them)."""
        grads = [t.detach().clone().requires_grad_() for t in leaves]
        flowing = None if dy is None else dy.clone()

        def run():
            out = fn(*grads) if targets is None else fn(*grads, targets)
            return torch.autograd.grad(out, grads, flowing)
        return run

    if kind == "rms_norm":
        ours = lambda: K.rms_norm_backward(dy, leaves[0], leaves[1], K.rms_norm_forward(*leaves)[1])  # noqa: E731
    elif kind == "layer_norm":
        def ours():
            _, mean, rstd = K.layer_norm_forward(*leaves)
            return K.layer_norm_backward(dy, leaves[0], leaves[1], mean, rstd)
    elif kind == "swiglu":
        def ours():
            K.swiglu(*leaves)
            return K.swiglu_backward(dy, *leaves)
    elif kind == "cross_entropy":
        scratch = leaves[0].clone()  # overwritten by the gradient each call, as Liger's is
        ours = lambda: (K.cross_entropy(scratch, targets, inplace=True)[1],)  # noqa: E731
    else:
        ours = lambda: K.linear_cross_entropy(*leaves, targets)[1:]  # noqa: E731
    runs = {"asyncdsl": ours, "torch.compile": autograd(compiled), "torch eager": autograd(eager)}
    if liger is not None:
        runs["liger"] = autograd(liger[kind])
    return runs


def _errors(kind, leaves, targets, dy, gradients):
    """Each gradient's largest error against float64 autograd of the eager code, relative."""
    import torch

    wide = [t.detach().double().requires_grad_() for t in leaves]
    eager = _eager(kind)
    out = eager(*wide) if targets is None else eager(*wide, targets)
    expected = torch.autograd.grad(out, wide, None if dy is None else dy.double())
    return max(float((g.double() - e).abs().max() / e.abs().max()) for g, e in zip(gradients, expected))


SHAPES = {"rms_norm": NORMS, "layer_norm": NORMS, "swiglu": SWIGLU, "cross_entropy": VOCABULARIES,
          "linear_cross_entropy": LAST_LAYERS}


def main(kinds: list[str]) -> None:
    """Each kind's shapes, its results in row_backward_KIND.json (`write_result`): per shape
    {"KIND SHAPE fwd+bwd (UNIT)": {contender: figure}, "... error": {contender: error}, the ratio}
    (docs/performance.md's form), and for the last layer "... peak memory MiB" too."""
    liger = _liger()
    for kind in kinds:
        results = {}
        for shape in SHAPES[kind]:
            measure = _last_layer if kind == "linear_cross_entropy" else functools.partial(_row_kernel, kind)
            figures, unit = measure(*shape, liger)
            label = f"{kind} {'x'.join(map(str, shape))} fwd+bwd"
            results[f"{label} ({unit})"] = {name[:-len(unit) - 3]: value for name, value in figures.items()
                                            if name.endswith(f"({unit})")}
            for what in ("error", "peak memory MiB"):
                found = {name[:-len(what) - 1]: value for name, value in figures.items()
                         if name.endswith(what)}
                if found:
                    results[f"{label} {what}"] = found
            results[f"{label} asyncdsl / best of liger and torch.compile"] = \
                figures["asyncdsl / best of liger and torch.compile"]
        write_result(f"row_backward_{kind}", results)


def _row_kernel(kind: str, m: int, n: int, liger) -> tuple[dict, str]:
    """A row kernel's figures (TB/s, errors) and their unit."""
    import torch

    torch.manual_seed(m + n)
    leaves, targets, dy = _inputs(kind, m, n)
    runs = _contenders(kind, leaves, targets, dy, liger)
    row = {}
    for name, run in runs.items():  # the first call (on inputs no call has overwritten yet) checked
        row[f"{name} error"] = _errors(kind, leaves, targets, dy, run())
    torch.cuda.synchronize()
    for name, ms in rounds_of_gpu_ms(runs, rounds=7, warmup=5, rep=20).items():
        row[f"{name} (TB/s)"] = m * n * BYTES[kind] / ms / 1e9
    peers = [row[f"{name} (TB/s)"] for name in ("liger", "torch.compile") if f"{name} (TB/s)" in row]
    row["asyncdsl / best of liger and torch.compile"] = row["asyncdsl (TB/s)"] / max(peers)
    print(kind, f"{m}x{n}", {k: round(v, 5) for k, v in row.items()}, flush=True)
    return row, "TB/s"


def _last_layer(tokens: int, hidden: int, v: int, liger) -> tuple[dict, str]:
    """The fused last layer's figures (TFLOP/s, peak memory beyond the inputs, errors) and their
    unit."""
    import torch

    torch.manual_seed(tokens + v)
    leaves = [torch.randn(tokens, hidden, device="cuda").bfloat16(),
              (torch.randn(v, hidden, device="cuda") * 0.02).bfloat16()]
    targets = torch.randint(0, v, (tokens,), device="cuda")
    targets[::16] = -100
    runs = _contenders("linear_cross_entropy", leaves, targets, None, liger)
    row = {}
    for name, run in runs.items():
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        gradients = run()
        torch.cuda.synchronize()
        row[f"{name} peak memory MiB"] = (torch.cuda.max_memory_allocated() - before) / 2 ** 20
        row[f"{name} error"] = _errors("linear_cross_entropy", leaves, targets, None, gradients)
        del gradients
    for name, ms in rounds_of_gpu_ms(runs, rounds=5, warmup=2, rep=10).items():
        row[f"{name} (TFLOP/s)"] = 6 * tokens * hidden * v / ms / 1e9
    peers = [row[f"{name} (TFLOP/s)"] for name in ("liger", "torch.compile") if f"{name} (TFLOP/s)" in row]
    row["asyncdsl / best of liger and torch.compile"] = row["asyncdsl (TFLOP/s)"] / max(peers)
    print(f"linear_cross_entropy {tokens}x{hidden}x{v}", {k: round(x, 4) for k, x in row.items()}, flush=True)
    return row, "TFLOP/s"


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kinds", nargs="*", metavar="KIND",
                        help=f"of {', '.join(SHAPES)} (default: all; one a run keeps each under 3 minutes)")
    kinds = parser.parse_args().kinds or list(SHAPES)
    if set(kinds) - set(SHAPES):
        parser.error(f"unknown kinds {sorted(set(kinds) - set(SHAPES))}; they are {', '.join(SHAPES)}")
    main(kinds)
