"""Float64 references of the kernel library's training and serving functions, in the host signatures
`asyncdsl.ops` calls (numpy arrays in and out, as `asyncdsl.torch.library_call` hands over the
tensors of the CPU), and fixtures that put them in
`asyncdsl.kernels`: `missing_kernels` where the library has no such function, `reference_kernels`
in place of every one (float64 throughout, for `torch.autograd.gradcheck`).  They are written from
the formulas, not from torch's autograd, which the tests compare them with."""

from __future__ import annotations

import numpy as np
import pytest


def _wide(array) -> np.ndarray:
    return np.asarray(array, np.float64)


def _like(array, like: np.ndarray) -> np.ndarray:
    """`array` in `like`'s dtype, row-major as the kernels make their outputs."""
    return np.array(array, like.dtype, order="C")


def _float32(array) -> np.ndarray:
    return np.array(array, np.float32, order="C")


def _bhsd(x: np.ndarray, layout: str) -> np.ndarray:
    return x if layout == "BHSD" else x.transpose(0, 2, 1, 3)


def _scores(q, k, causal):
    """Scaled scores (B, H, S, S_kv) with the key heads repeated over their query groups."""
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k, group, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    return s


def attention(q, k, v, *, causal=False, layout="BHSD"):
    wq, wk, wv = (_bhsd(_wide(t), layout) for t in (q, k, v))
    s = _scores(wq, wk, causal)
    lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    o = np.exp(s - lse[..., None]) @ np.repeat(wv, wq.shape[1] // wv.shape[1], axis=1)
    return _like(_bhsd(o, layout), q), _float32(lse)


def attention_backward(q, k, v, o, lse, do, *, causal=False, deterministic=False, layout="BHSD"):
    wq, wk, wv, wo, wdo = (_bhsd(_wide(t), layout) for t in (q, k, v, o, do))
    group = wq.shape[1] // wk.shape[1]
    p = np.exp(_scores(wq, wk, causal) - _wide(lse)[..., None])
    dv = p.transpose(0, 1, 3, 2) @ wdo
    dp = wdo @ np.repeat(wv, group, axis=1).transpose(0, 1, 3, 2)
    ds = p * (dp - (wdo * wo).sum(-1, keepdims=True)) / np.sqrt(wq.shape[-1])
    dq = ds @ np.repeat(wk, group, axis=1)
    dk = ds.transpose(0, 1, 3, 2) @ wq

    def per_key_head(x):
        return x.reshape(x.shape[0], -1, group, *x.shape[2:]).sum(2)

    return (_like(_bhsd(dq, layout), q), _like(_bhsd(per_key_head(dk), layout), k),
            _like(_bhsd(per_key_head(dv), layout), v))


def _sequences(cu_seqlens_q, cu_seqlens_k):
    """(query rows, key rows) of each packed sequence that has queries."""
    ends_q, ends_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    return [(slice(a, b), slice(c, d)) for a, b, c, d in zip(ends_q, ends_q[1:], ends_k, ends_k[1:]) if b > a]


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, causal=False):
    o, lse = np.zeros_like(q), np.zeros((q.shape[1], q.shape[0]), np.float32)
    for rows, keys in _sequences(cu_seqlens_q, cu_seqlens_k):
        one_o, one_lse = attention(q[None, rows], k[None, keys], v[None, keys], causal=causal, layout="BSHD")
        o[rows], lse[:, rows] = one_o[0], one_lse[0]
    return o, lse


def attention_varlen_backward(q, k, v, o, lse, do, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
                              causal=False, deterministic=False):
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for rows, keys in _sequences(cu_seqlens_q, cu_seqlens_k):
        dq[rows], dk[keys], dv[keys] = (g[0] for g in attention_backward(
            q[None, rows], k[None, keys], v[None, keys], o[None, rows], lse[None, :, rows], do[None, rows],
            causal=causal, layout="BSHD"))
    return dq, dk, dv


def rms_norm_forward(x, w, eps):
    wx = _wide(x)
    rstd = 1 / np.sqrt((wx * wx).mean(-1) + eps)
    return _like(wx * rstd[:, None] * _wide(w), x), _float32(rstd)


def rms_norm_backward(dy, x, w, rstd):
    wx, wr = _wide(x), _wide(rstd)[:, None]
    g, xhat = _wide(dy) * _wide(w), wx * wr
    dx = wr * (g - xhat * (g * xhat).mean(-1, keepdims=True))
    return _like(dx, x), _like((_wide(dy) * xhat).sum(0), w)


def layer_norm_forward(x, w, b, eps):
    wx = _wide(x)
    mean = wx.mean(-1)
    rstd = 1 / np.sqrt(((wx - mean[:, None]) ** 2).mean(-1) + eps)
    y = (wx - mean[:, None]) * rstd[:, None] * _wide(w) + _wide(b)
    return _like(y, x), _float32(mean), _float32(rstd)


def layer_norm_backward(dy, x, w, mean, rstd):
    wdy, wr = _wide(dy), _wide(rstd)[:, None]
    xhat = (_wide(x) - _wide(mean)[:, None]) * wr
    g = wdy * _wide(w)
    dx = wr * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    return _like(dx, x), _like((wdy * xhat).sum(0), w), _like(wdy.sum(0), w)


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


def swiglu(gate, up):
    a = _wide(gate)
    return _like(a * _sigmoid(a) * _wide(up), gate)


def swiglu_backward(dy, gate, up):
    a, b, wdy = _wide(gate), _wide(up), _wide(dy)
    sig = _sigmoid(a)
    return _like(wdy * b * sig * (1 + a * (1 - sig)), gate), _like(wdy * a * sig, up)


def _losses(z: np.ndarray, targets: np.ndarray, ignore_index: int, reduction: str):
    """Per-row losses and d(reduced loss)/dz of logits z (N, V), float64."""
    kept = targets != ignore_index
    safe = np.where(kept, targets, 0)
    top = z.max(-1, keepdims=True)
    lse = np.log(np.exp(z - top).sum(-1)) + top[:, 0]
    rows = np.where(kept, lse - z[np.arange(len(z)), safe], 0.0)
    dz = np.exp(z - lse[:, None])
    dz[np.arange(len(z)), safe] -= 1
    dz *= kept[:, None]
    if reduction == "mean":  # of no rows: a loss of 0/0 = nan, a gradient of 0 (as torch's)
        with np.errstate(invalid="ignore"):
            return rows.sum() / kept.sum(), dz / max(kept.sum(), 1)
    return (rows.sum(), dz) if reduction == "sum" else (rows, dz)


def cross_entropy(logits, targets, *, ignore_index=-100, reduction="mean"):
    loss, dz = _losses(_wide(logits), np.asarray(targets), ignore_index, reduction)
    return _float32(loss), _like(dz, logits)


def linear_cross_entropy(h, weight, targets, *, ignore_index=-100, reduction="mean"):
    wh, ww = _wide(h), _wide(weight)
    loss, dz = _losses(wh @ ww.T, np.asarray(targets), ignore_index, reduction)
    return _float32(loss), _like(dz @ ww, h), _like(dz.T @ wh, weight)


def rotary(q, k, cos, sin, *, inverse=False):
    """x · cos + rotate_half(x) · sin for q and k (B, S, H, D), cos and sin (B or 1, S, D); the
    transpose of that map when `inverse`."""
    c, s = _wide(cos)[:, :, None], _wide(sin)[:, :, None]

    def rotate_half(x):
        half = x.shape[-1] // 2
        return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)

    def rotate(x):
        wx = _wide(x)
        if inverse:  # the transpose: rotate_half's is -rotate_half
            return _like(wx * c - rotate_half(wx * s), x)
        return _like(wx * c + rotate_half(wx) * s, x)

    return rotate(q), rotate(k)


def paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens, *, k_scale=None, v_scale=None):
    """Each sequence's keys and values gathered from its pages; L > 1 new tokens a sequence see
    the keys up to their own position."""
    wq = _wide(q) if q.ndim == 4 else _wide(q)[:, None]
    caches = [_wide(c) * (1 if s is None else _wide(s)) for c, s in ((k_cache, k_scale), (v_cache, v_scale))]
    page = k_cache.shape[1]
    o = np.empty_like(wq)
    for b, length in enumerate(seq_lens.tolist()):
        pages = block_table[b, : -(-length // page)].tolist()
        k, v = (c[pages].reshape(-1, *c.shape[2:])[:length].transpose(1, 0, 2) for c in caches)
        group = wq.shape[2] // k.shape[0]
        s = np.einsum("lhd,hkd->hlk", wq[b], np.repeat(k, group, 0)) / np.sqrt(wq.shape[-1])
        tokens = wq.shape[1]
        s = np.where(np.arange(length)[None, :] <= length - tokens + np.arange(tokens)[:, None], s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        o[b] = np.einsum("hlk,hkd->lhd", p / p.sum(-1, keepdims=True), np.repeat(v, group, 0))
    return _like(o if q.ndim == 4 else o[:, 0], q)


def grouped_gemm(a, b, offsets):
    wa, wb, ends = _wide(a), _wide(b), offsets.tolist()
    c = np.zeros((wa.shape[0], wb.shape[2]))
    for g, (start, end) in enumerate(zip([0, *ends[:-1]], ends)):
        c[start:end] = wa[start:end] @ wb[g]
    return _like(c, a)


REFERENCES = {f.__name__: f for f in (attention, attention_backward, attention_varlen,
                                     attention_varlen_backward, rms_norm_forward, rms_norm_backward,
                                   layer_norm_forward, layer_norm_backward, swiglu, swiglu_backward,
                                   cross_entropy, linear_cross_entropy, rotary, paged_decode_attention,
                                   grouped_gemm)}


@pytest.fixture
def missing_kernels(monkeypatch):
    """The references stand in for the functions `asyncdsl.kernels` does not have; those it
    has run in the interpreter."""
    import asyncdsl.kernels

    for name, reference in REFERENCES.items():
        if not hasattr(asyncdsl.kernels, name):
            monkeypatch.setattr(asyncdsl.kernels, name, reference, raising=False)


@pytest.fixture
def reference_kernels(monkeypatch):
    """Every function of `asyncdsl.kernels` above by its float64 reference."""
    import asyncdsl.kernels

    for name, reference in REFERENCES.items():
        monkeypatch.setattr(asyncdsl.kernels, name, reference, raising=False)
