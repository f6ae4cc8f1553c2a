"""A mixture-of-experts feed-forward layer from the library's grouped GEMM: every step on the
device, no host synchronisation on how many tokens each expert gets.

1. Routing: the router's logits x @ w_router, each token's top-k experts, their weights the
   softmax of those k logits.
2. Permutation by a gather: the (token, choice) pairs sorted by expert (a stable argsort), the
   tokens' rows gathered in that order, so that each expert's rows are contiguous; the experts'
   row ends (`offsets`, int32) are the cumulative counts, computed where the routing is.
3. `grouped_gemm` twice, for the experts' gate and up projections, and SwiGLU between them.
4. `grouped_gemm` for the down projection.
5. Weighted un-permutation: each pair's output row times its weight, added into its token's row.

The same function takes numpy arrays (the kernels run in the interpreter; the routing in numpy)
or torch CUDA tensors (the kernels on the GPU; the routing in torch).

    python -m asyncdsl.examples.moe_layer     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace

import ml_dtypes
import numpy as np

import asyncdsl.kernels as K


def moe_layer(x, w_router, w_gate, w_up, w_down, top_k: int):
    """The layer's output for tokens x (T, H): w_router (H, E), w_gate and w_up (E, H, F),
    w_down (E, F, H), all bfloat16; each token's top_k experts' outputs, weighted."""
    ops = _torch_ops() if not isinstance(x, np.ndarray) else _numpy_ops()
    experts = w_gate.shape[0]
    logits = ops.float32(x) @ ops.float32(w_router)
    chosen, weights = ops.top_k(logits, top_k)                       # (T, k) each
    pairs = ops.stable_argsort(chosen.reshape(-1))                   # (token, choice) pairs by expert
    tokens = pairs // top_k
    offsets = ops.int32(ops.cumsum(ops.bincount(chosen.reshape(-1), experts)))
    rows = x[tokens]                                                 # the gather
    hidden = K.swiglu(K.grouped_gemm(rows, w_gate, offsets), K.grouped_gemm(rows, w_up, offsets))
    out_rows = K.grouped_gemm(hidden, w_down, offsets)
    weighted = ops.float32(out_rows) * weights.reshape(-1)[pairs][:, None]
    return ops.bfloat16(ops.add_rows(ops.zeros_like(logits, x.shape), tokens, weighted))


def _top_k_numpy(logits, k):
    chosen = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    top = np.take_along_axis(logits, chosen, axis=1)
    weights = np.exp(top - top.max(axis=1, keepdims=True))
    return chosen, weights / weights.sum(axis=1, keepdims=True)


def _add_rows_numpy(out, rows, values):
    np.add.at(out, rows, values)
    return out


# The routing's array operations, in numpy and in torch: the layer's code is the same for both.
def _numpy_ops():
    return SimpleNamespace(
        float32=lambda a: a.astype(np.float32), bfloat16=lambda a: a.astype(ml_dtypes.bfloat16),
        int32=lambda a: a.astype(np.int32), top_k=_top_k_numpy,
        stable_argsort=lambda a: np.argsort(a, kind="stable"),
        bincount=lambda a, n: np.bincount(a, minlength=n), cumsum=np.cumsum,
        zeros_like=lambda like, shape: np.zeros(shape, np.float32), add_rows=_add_rows_numpy)


def _torch_ops():
    import torch

    def top_k(logits, k):
        top, chosen = torch.topk(logits, k, dim=1)
        return chosen, torch.softmax(top, dim=1)

    return SimpleNamespace(
        float32=lambda a: a.float(), bfloat16=lambda a: a.to(torch.bfloat16),
        int32=lambda a: a.to(torch.int32), top_k=top_k,
        stable_argsort=lambda a: torch.argsort(a, stable=True),
        bincount=lambda a, n: torch.bincount(a, minlength=n), cumsum=lambda a: torch.cumsum(a, 0),
        zeros_like=lambda like, shape: torch.zeros(shape, device=like.device, dtype=torch.float32),
        add_rows=lambda out, rows, values: out.index_add_(0, rows, values))


def reference(x, w_router, w_gate, w_up, w_down, top_k: int) -> np.ndarray:
    """The layer in float64, token by token (numpy arrays), from the same routing."""
    ops = _numpy_ops()
    chosen, weights = ops.top_k(x.astype(np.float32) @ w_router.astype(np.float32), top_k)
    x64 = x.astype(np.float64)
    out = np.zeros(x.shape)
    for e in range(w_gate.shape[0]):
        token, choice = np.nonzero(chosen == e)
        gate, up = x64[token] @ w_gate[e].astype(np.float64), x64[token] @ w_up[e].astype(np.float64)
        y = (gate / (1 + np.exp(-gate)) * up) @ w_down[e].astype(np.float64)
        np.add.at(out, token, y * weights[token, choice][:, None])
    return out


def main() -> int:
    import importlib.util

    from asyncdsl.runtime import has_gpu

    on_gpu = has_gpu() and importlib.util.find_spec("torch") is not None  # the routing needs torch there
    tokens, hidden, ffn, experts, top_k = (2048, 1024, 2048, 8, 2) if on_gpu else (96, 64, 128, 4, 2)
    rng = np.random.default_rng(0)

    def weights(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[-2])).astype(ml_dtypes.bfloat16)

    x = rng.standard_normal((tokens, hidden)).astype(ml_dtypes.bfloat16)
    arrays = [x, weights(hidden, experts), weights(experts, hidden, ffn), weights(experts, hidden, ffn),
              weights(experts, ffn, hidden)]
    start = time.perf_counter()
    if on_gpu:
        import torch

        x_, router, gate, up, down = (torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16).cuda()
                                      for a in arrays)
        y = moe_layer(x_, router, gate, up, down, top_k).float().cpu().numpy()
    else:
        y = moe_layer(x, arrays[1], arrays[2], arrays[3], arrays[4], top_k).astype(np.float32)
    elapsed = time.perf_counter() - start
    exact = reference(x, arrays[1], arrays[2], arrays[3], arrays[4], top_k)
    error = float(np.linalg.norm(y - exact) / np.linalg.norm(exact))
    ok = error < 2 ** -7  # bf16 rounding of the layer's intermediate results
    where = "GPU" if on_gpu else "interpreter"
    print(f"moe_layer {tokens} tokens, {experts} experts, top {top_k} on the {where}: relative error vs "
          f"float64 {error:.2e} {'ok' if ok else 'TOO LARGE'} ({elapsed * 1e3:.0f} ms incl. compiles)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
