"""asyncdsl.ops on the CPU: the operators' schemas, `torch.library.opcheck` (fake
implementations, autograd registration, AOT dispatch), `gradcheck` of the autograd wiring,
gradients of bf16 inputs against torch's float64 autograd with the kernels the library has
interpreted, and a model traced whole by `torch.compile(fullgraph=True)` forward and backward.
The kernel functions the library does not have yet are stood in for by the float64 references of
conftest.py.  tests/gpu/test_ops_gpu.py runs the operators on the GPU."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import asyncdsl.ops as ops  # noqa: E402
from asyncdsl.errors import ArgumentError  # noqa: E402
from asyncdsl.ops.attention import attention_backward, attention_forward  # noqa: E402
from asyncdsl.ops.attention_varlen import attention_varlen_backward, attention_varlen_forward  # noqa: E402
from asyncdsl.ops.cross_entropy import cross_entropy_forward  # noqa: E402
from asyncdsl.ops.layer_norm import layer_norm_backward, layer_norm_forward  # noqa: E402
from asyncdsl.ops.linear_cross_entropy import linear_cross_entropy_forward  # noqa: E402
from asyncdsl.ops.rms_norm import rms_norm_backward, rms_norm_forward  # noqa: E402
from asyncdsl.ops.rotary import rotary_forward  # noqa: E402
from asyncdsl.ops.swiglu import swiglu_backward, swiglu_forward  # noqa: E402


def randn(*shape, seed: int, dtype=torch.float64, grad: bool = True) -> torch.Tensor:
    tensor = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return tensor.to(dtype).requires_grad_(grad)


def targets(rows: int, vocab: int, seed: int) -> torch.Tensor:
    """Class indices with every third row ignored (-100)."""
    drawn = torch.randint(0, vocab, (rows,), generator=torch.Generator().manual_seed(seed))
    return torch.where(torch.arange(rows) % 3 == 1, -100, drawn)


def test_the_operators_have_their_schemas():
    schemas = {
        "attention": "(Tensor q, Tensor k, Tensor v, bool causal, str layout, bool deterministic) -> "
                     "(Tensor, Tensor)",
        "attention_backward": "(Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor do, bool causal, "
                              "str layout, bool deterministic) -> (Tensor, Tensor, Tensor)",
        "rms_norm": "(Tensor x, Tensor weight, float eps) -> (Tensor, Tensor)",
        "layer_norm_backward": "(Tensor dy, Tensor x, Tensor weight, Tensor mean, Tensor rstd) -> "
                               "(Tensor, Tensor, Tensor)",
        "swiglu": "(Tensor gate, Tensor up) -> Tensor",
        "rotary": "(Tensor q, Tensor k, Tensor cos, Tensor sin, bool inverse) -> (Tensor, Tensor)",
        "cross_entropy": "(Tensor logits, Tensor targets, int ignore_index, str reduction) -> "
                         "(Tensor, Tensor)",
        "linear_cross_entropy": "(Tensor h, Tensor weight, Tensor targets, int ignore_index, "
                                "str reduction) -> (Tensor, Tensor, Tensor)",
    }
    for name, schema in schemas.items():
        assert str(getattr(torch.ops.asyncdsl, name).default._schema) == f"asyncdsl::{name}{schema}"


def angles(batch: int, seq: int, d: int, seed: int, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama's cos and sin (B, S, D): the two halves of each position's angles equal."""
    half = torch.rand(batch, seq, d // 2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    theta = torch.cat([half, half], -1) * 100
    return theta.cos().to(dtype), theta.sin().to(dtype)


def _opcheck_cases():
    q, k, v = randn(1, 4, 9, 16, seed=1), randn(1, 2, 9, 16, seed=2), randn(1, 2, 9, 16, seed=3)
    o, lse = torch.randn(1, 4, 9, 16, dtype=torch.float64), torch.randn(1, 4, 9)
    x, w, b = randn(2, 3, 32, seed=4), randn(32, seed=5), randn(32, seed=6)
    rows = torch.rand(6)
    q0, k0, v0, x0, w0 = (t.detach() for t in (q, k, v, x, w))  # backward passes are not differentiable
    packed = (q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1))  # (9, heads, 16)
    cu = torch.tensor([0, 4, 4, 9], dtype=torch.int32)  # an empty sequence among them
    return [
        (attention_varlen_forward, (*packed, cu, cu, 5, 5, True, False)),
        (attention_varlen_backward, (*(t.detach() for t in packed), o[0].transpose(0, 1), lse[0],
                                     torch.randn(9, 4, 16, dtype=torch.float64), cu, cu, 5, 5, True, False)),
        (attention_forward, (q, k, v, True, "BHSD", False)),
        (attention_forward, (*(t.transpose(1, 2) for t in (q, k, v)), False, "BSHD", True)),
        (attention_backward, (q0, k0, v0, o, lse, torch.randn_like(o), True, "BHSD", False)),
        (rms_norm_forward, (x, w, 1e-6)),
        (rms_norm_backward, (torch.randn_like(x0), x0, w0, rows)),
        (layer_norm_forward, (x, w, b, 1e-5)),
        (layer_norm_backward, (torch.randn_like(x0), x0, w0, torch.randn(6), rows)),
        (swiglu_forward, (x, torch.randn_like(x))),
        (rotary_forward, (randn(2, 5, 4, 16, seed=17), randn(2, 5, 2, 16, seed=18), *angles(1, 5, 16, 19),
                          False)),
        (rotary_forward, (randn(2, 5, 4, 16, seed=17), randn(2, 5, 2, 16, seed=18), *angles(2, 5, 16, 19),
                          True)),
        (swiglu_backward, (torch.randn_like(x0), x0, torch.randn_like(x0))),
        (cross_entropy_forward, (randn(7, 50, seed=7), targets(7, 50, 8), -100, "mean")),
        (cross_entropy_forward, (randn(7, 50, seed=7), targets(7, 50, 8), -100, "none")),
        (linear_cross_entropy_forward, (randn(7, 32, seed=9), randn(50, 32, seed=10), targets(7, 50, 8), -100,
                                        "sum")),
    ]


@pytest.mark.parametrize("operator, args", _opcheck_cases())
def test_opcheck(reference_kernels, operator, args):
    """Schema, fake implementation (also with dynamic shapes) and autograd registration, each
    checked by torch against the real implementation."""
    torch.library.opcheck(operator, args)


CU_SEQLENS = torch.tensor([0, 3, 4, 8], dtype=torch.int32)  # sequences of 3, 1 and 4 tokens
GRADCHECK_CASES = {
    "attention causal, grouped": (
        lambda q, k, v: ops.attention(q, k, v, causal=True),
        (randn(1, 4, 5, 8, seed=1), randn(1, 2, 5, 8, seed=2), randn(1, 2, 5, 8, seed=3))),
    "attention BSHD": (
        lambda q, k, v: ops.attention(q, k, v, layout="BSHD"),
        (randn(2, 3, 2, 8, seed=4), randn(2, 6, 2, 8, seed=5), randn(2, 6, 2, 8, seed=6))),
    "attention_varlen causal, grouped": (
        lambda q, k, v: ops.attention_varlen(q, k, v, CU_SEQLENS, CU_SEQLENS, 4, 4, causal=True),
        (randn(8, 4, 8, seed=14), randn(8, 2, 8, seed=15), randn(8, 2, 8, seed=16))),
    "rms_norm": (lambda x, w: ops.rms_norm(x, w, 1e-6), (randn(2, 3, 16, seed=7), randn(16, seed=8))),
    "layer_norm": (lambda x, w, b: ops.layer_norm(x, w, b), (randn(4, 16, seed=9), randn(16, seed=10),
                                                            randn(16, seed=11))),
    "swiglu": (ops.swiglu, (randn(2, 3, 16, seed=12), randn(2, 3, 16, seed=13))),
    "rotary": (lambda q, k: ops.rotary(q, k, *angles(1, 3, 16, seed=20)),
               (randn(2, 3, 4, 16, seed=21), randn(2, 3, 2, 16, seed=22))),
    # Angles a sequence, their cosines and sines unrelated (halves unequal): only the map's true
    # transpose passes.
    "rotary, any angles": (lambda q, k: ops.rotary(q, k, randn(2, 3, 16, seed=23, grad=False),
                                                   randn(2, 3, 16, seed=24, grad=False)),
                           (randn(2, 3, 4, 16, seed=21), randn(2, 3, 2, 16, seed=22))),
}


@pytest.mark.parametrize("name", GRADCHECK_CASES)
def test_gradcheck(reference_kernels, name):
    function, inputs = GRADCHECK_CASES[name]
    assert torch.autograd.gradcheck(function, inputs)


def test_varlen_attention_keeps_the_sequences_apart(reference_kernels):
    q, k, v = randn(8, 4, 8, seed=1), randn(8, 2, 8, seed=2), randn(8, 2, 8, seed=3)
    got = ops.attention_varlen(q, k, v, CU_SEQLENS, CU_SEQLENS, 4, 4, causal=True)
    for a, b in ((0, 3), (3, 4), (4, 8)):
        one = [t[a:b].transpose(0, 1) for t in (q, k, v)]
        want = F.scaled_dot_product_attention(*one, is_causal=True, enable_gqa=True).transpose(0, 1)
        torch.testing.assert_close(got[a:b], want)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_gradcheck_cross_entropy(reference_kernels, reduction):
    # The losses are float32, so the finite differences take wider steps.
    labels = targets(6, 40, 1)
    assert torch.autograd.gradcheck(lambda z: ops.cross_entropy(z, labels, reduction=reduction),
                                    (randn(6, 40, seed=2),), eps=1e-3, atol=2e-3)
    h, w = randn(2, 3, 16, seed=3), randn(40, 16, seed=4)
    if reduction != "none":
        assert torch.autograd.gradcheck(
            lambda h, w: ops.linear_cross_entropy(h, w, labels.view(2, 3), reduction=reduction), (h, w),
            eps=1e-3, atol=2e-3)


def _compare(got: torch.Tensor, want: torch.Tensor, tolerance: float) -> None:
    error = (got.double() - want).abs().max().item()
    assert error <= tolerance * want.abs().max().item(), (error, want.abs().max().item())


def _bf16_grads(function, reference, inputs, tolerance: float) -> None:
    """The operator on bf16 inputs against torch's float64 autograd of `reference`."""
    low = [t.detach().to(torch.bfloat16).requires_grad_() if t.is_floating_point() else t for t in inputs]
    wide = [t.detach().double().requires_grad_(t.is_floating_point()) if t.is_floating_point() else t
            for t in low]
    out, expected = function(*low), reference(*wide)
    _compare(out, expected.detach(), tolerance)
    seed = torch.randn(expected.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    floats = [i for i, t in enumerate(low) if t.is_floating_point()]
    got = torch.autograd.grad(out, [low[i] for i in floats], seed.to(out.dtype))
    want = torch.autograd.grad(expected, [wide[i] for i in floats], seed)
    for g, w in zip(got, want):
        assert g.dtype == torch.bfloat16 and g.shape == w.shape
        _compare(g, w, tolerance)


def test_attention_gradients_bf16(missing_kernels):
    # Ragged (70 rows: no whole block), causal, grouped, in the (B, S, H, D) layout.
    inputs = (randn(1, 70, 4, 64, seed=1), randn(1, 70, 2, 64, seed=2), randn(1, 70, 2, 64, seed=3))

    def reference(q, k, v):
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True, enable_gqa=True)
        return o.transpose(1, 2)

    _bf16_grads(lambda q, k, v: ops.attention(q, k, v, causal=True, layout="BSHD"), reference, inputs, 0.02)


def test_norm_and_swiglu_gradients_bf16(missing_kernels):
    x, w, b = randn(3, 5, 256, seed=1), randn(256, seed=2), randn(256, seed=3)

    def rms(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w

    _bf16_grads(lambda x, w: ops.rms_norm(x, w, 1e-6), rms, (x, w), 0.02)
    _bf16_grads(ops.layer_norm, lambda x, w, b: F.layer_norm(x, (256,), w, b), (x, w, b), 0.02)
    _bf16_grads(ops.swiglu, lambda a, b: F.silu(a) * b, (x, randn(3, 5, 256, seed=4)), 0.02)


def test_rotary_gradients_bf16(missing_kernels):
    cos, sin = angles(2, 40, 64, seed=1, dtype=torch.float32)

    def rotate_half(x):
        return torch.cat([-x[..., 32:], x[..., :32]], -1)

    def reference(q, k):  # transformers' apply_rotary_pos_emb on (B, S, H, D) tensors
        c, s = cos.double()[:, :, None], sin.double()[:, :, None]
        return torch.cat([(x * c + rotate_half(x) * s).flatten() for x in (q, k)])

    _bf16_grads(lambda q, k: torch.cat([x.flatten() for x in ops.rotary(q, k, cos, sin)]), reference,
                (randn(2, 40, 4, 64, seed=2), randn(2, 40, 2, 64, seed=3)), 0.01)


def test_loss_gradients_bf16(missing_kernels):
    labels = targets(24, 296, 5)  # the fused loss takes vocabularies of a multiple of 8
    _bf16_grads(lambda z, t: ops.cross_entropy(z, t), lambda z, t: F.cross_entropy(z, t),
                (randn(24, 296, seed=1), labels), 0.02)
    _bf16_grads(lambda h, w, t: ops.linear_cross_entropy(h, w, t, reduction="sum"),
                lambda h, w, t: F.cross_entropy(h @ w.T, t, reduction="sum"),
                (randn(24, 64, seed=2), randn(296, 64, seed=3), labels), 0.02)


@pytest.mark.parametrize("kernels", ["missing_kernels", "reference_kernels"])
def test_with_every_target_ignored_the_mean_and_its_gradients_are_torchs(kernels, request):
    # torch's mean of no rows is 0/0 = nan; the ignored rows' gradients stay 0.
    request.getfixturevalue(kernels)
    labels = torch.full((6,), -100)
    z, h, w = randn(6, 40, seed=1), randn(6, 16, seed=2), randn(40, 16, seed=3)
    for function, reference, inputs in (
            (ops.cross_entropy, F.cross_entropy, (z,)),
            (ops.linear_cross_entropy, lambda h, w, t: F.cross_entropy(h @ w.T, t), (h, w))):
        low = [t.detach().to(torch.bfloat16 if function is ops.linear_cross_entropy else torch.float32)
               .requires_grad_() for t in inputs]
        got, want = function(*low, labels), reference(*inputs, labels)
        assert got.isnan() and want.isnan()
        for mine, torchs in zip(torch.autograd.grad(got, low), torch.autograd.grad(want, inputs)):
            assert torch.equal(mine.double(), torchs) and not torchs.any()


class Block(torch.nn.Module):
    """Every operator in one model: norms, attention, a gated MLP and both losses."""

    def __init__(self, width: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.norm = torch.nn.LayerNorm(width, dtype=torch.float64)
        self.qkv = torch.nn.Linear(width, 2 * width, dtype=torch.float64)
        self.gate_up = torch.nn.Linear(width, 2 * width, dtype=torch.float64)
        self.rms = torch.nn.Parameter(torch.ones(width, dtype=torch.float64))
        self.head = torch.nn.Parameter(torch.randn(50, width, dtype=torch.float64))

    def forward(self, x, labels):
        h = ops.layer_norm(x, self.norm.weight, self.norm.bias)
        b, s, width = h.shape
        q, k, v = self.qkv(h).split([width, width // 2, width // 2], -1)  # half as many key/value heads
        heads = (b, s, self.heads, -1), (b, s, self.heads // 2, -1)
        a = ops.attention(q.view(heads[0]), k.view(heads[1]), v.view(heads[1]), causal=True, layout="BSHD")
        h = ops.rms_norm(h + a.reshape(b, s, width), self.rms)
        h = h + ops.swiglu(*self.gate_up(h).chunk(2, -1))
        logits = h @ self.head.T
        return (ops.cross_entropy(logits.view(-1, 50), labels)
                + ops.linear_cross_entropy(h, self.head, labels.view(b, s), reduction="sum"))


def test_a_model_compiles_whole_forward_and_backward(reference_kernels):
    torch.manual_seed(0)
    model = Block()
    x, labels = torch.randn(2, 6, 32, dtype=torch.float64), targets(12, 50, 3)
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return torch._dynamo.backends.debugging.aot_eager(graph_module, example_inputs)

    eager = model(x, labels)
    eager_grads = torch.autograd.grad(eager, list(model.parameters()))
    compiled = torch.compile(model, fullgraph=True, backend=backend)(x, labels)
    compiled_grads = torch.autograd.grad(compiled, list(model.parameters()))
    assert len(graphs) == 1
    called = {node.target for node in graphs[0].graph.nodes if node.op == "call_function"}
    assert {torch.ops.asyncdsl.attention.default, torch.ops.asyncdsl.rms_norm.default,
            torch.ops.asyncdsl.linear_cross_entropy.default} <= called
    torch.testing.assert_close(compiled, eager, rtol=1e-12, atol=1e-12)
    for got, want in zip(compiled_grads, eager_grads):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_misuse_is_an_argument_error():
    q = torch.zeros(1, 2, 4, 8)
    with pytest.raises(ArgumentError, match="differentiable in q and k only; cos and sin must not require"):
        ops.rotary(q, q, *(t.requires_grad_() for t in angles(1, 2, 8, seed=1)))
    with pytest.raises(ArgumentError, match="layout 'BHSD' or 'BSHD', got 'SBHD'"):
        ops.attention(q, q, q, layout="SBHD")
    with pytest.raises(ArgumentError, match="reduction is one of .* got 'max'"):
        ops.cross_entropy(torch.zeros(2, 5), torch.zeros(2, dtype=torch.long), reduction="max")
    with pytest.raises(ArgumentError, match=r"reduction is one of \('mean', 'sum'\), got 'none'"):
        ops.linear_cross_entropy(torch.zeros(2, 5), torch.zeros(3, 5), torch.zeros(2, dtype=torch.long),
                                 reduction="none")


@pytest.mark.parametrize("target_shape", [(3, 2), (6,)], ids=str)
def test_targets_not_in_the_rows_shape_are_refused(target_shape):
    # Flattened, (3, 2) or (6,) targets pair with a (2, 3) batch's rows in memory order: refused at
    # the caller's line, as torch refuses targets whose shape is not the logits' without the classes.
    labels = torch.zeros(target_shape, dtype=torch.long)
    z, h, w = torch.zeros(2, 3, 16), torch.zeros(2, 3, 8, dtype=torch.bfloat16), torch.zeros(16, 8)
    with pytest.raises(ValueError):
        F.cross_entropy(z.movedim(-1, 1), labels)
    refused = r"test_ops.py:\d+: cross_entropy takes targets of shape \(2, 3\), one a row of logits"
    with pytest.raises(ArgumentError, match=refused):
        ops.cross_entropy(z, labels, reduction="none")
    refused = r"linear_cross_entropy takes targets of shape \(2, 3\), one a row of h \(2, 3, 8\), got "
    with pytest.raises(ArgumentError, match=refused + re.escape(str(target_shape))):
        ops.linear_cross_entropy(h, w.bfloat16(), labels)


def test_swiglu_refuses_gate_and_up_of_different_shapes():
    # (2, 3, N) and (3, 2, N) have the same rows once flattened; torch's silu(gate) * up refuses them.
    gate, up = torch.zeros(2, 3, 128, dtype=torch.bfloat16), torch.zeros(3, 2, 128, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError):
        F.silu(gate) * up
    with pytest.raises(ArgumentError, match=r"test_ops.py:\d+: swiglu takes gate and up of one shape, got "
                                            r"\(2, 3, 128\) and \(3, 2, 128\)"):
        ops.swiglu(gate, up)


def test_the_row_operators_refuse_a_0d_tensor_at_the_callers_line():
    x, w = torch.zeros((), dtype=torch.bfloat16), torch.ones(4, dtype=torch.bfloat16)
    calls = {"rms_norm": lambda: ops.rms_norm(x, w), "layer_norm": lambda: ops.layer_norm(x, w, w),
             "swiglu": lambda: ops.swiglu(x, x), "cross_entropy": lambda: ops.cross_entropy(x, x.long()),
             "linear_cross_entropy": lambda: ops.linear_cross_entropy(x, w[None], x.long())}
    for name, call in calls.items():
        with pytest.raises(ArgumentError, match=rf"test_ops.py:\d+: {name} takes \w+ of rows along its last "
                                                r"axis, got a 0-d tensor"):
            call()


def test_the_losses_refuse_a_second_derivative(reference_kernels):
    # Their backward passes scale a gradient the forward pass made, a constant to autograd: a
    # gradient of the gradient would leave out the softmax's curvature (torch's has it).
    labels, z, h, w = targets(6, 40, 1), randn(6, 40, seed=1), randn(6, 16, seed=2), randn(40, 16, seed=3)
    (dz,) = torch.autograd.grad(F.cross_entropy(z, labels).square(), z, create_graph=True)
    assert torch.autograd.grad(dz.square().sum(), z)[0].abs().sum() > 0
    for loss, inputs in ((lambda: ops.cross_entropy(z, labels), (z,)),
                         (lambda: ops.linear_cross_entropy(h, w, labels), (h, w))):
        with pytest.raises(ArgumentError, match=r"test_ops.py:\d+: .*cross_entropy has no second derivative"):
            torch.autograd.grad(loss().square(), inputs, create_graph=True)
        assert all(g.shape == x.shape for g, x in zip(torch.autograd.grad(loss(), inputs), inputs))


def test_layer_norm_without_a_weight_or_bias_is_torchs(missing_kernels):
    # torch's LayerNorm(bias=False) and LayerNorm(elementwise_affine=False) hold None for them.
    x, w, b = randn(3, 256, seed=1), randn(256, seed=2), randn(256, seed=3)
    _bf16_grads(lambda x, w: ops.layer_norm(x, w, None), lambda x, w: F.layer_norm(x, (256,), w),
                (x, w), 0.02)
    _bf16_grads(lambda x, b: ops.layer_norm(x, None, b), lambda x, b: F.layer_norm(x, (256,), None, b),
                (x, b), 0.02)
    _bf16_grads(lambda x: ops.layer_norm(x, None, None), lambda x: F.layer_norm(x, (256,)), (x,), 0.02)
