"""asyncdsl.ops on the H200: gradients of bf16 inputs against float64 no worse than twice the error
of torch's own bf16 path (SDPA, its norms, silu, cross-entropy), the deterministic attention
backward bit-identical over five runs, training steps captured in a CUDA graph and compiled with
`torch.compile(fullgraph=True, mode="reduce-overhead")`, and a small transformers Llama on the
operators against transformers' SDPA model.  The serving operators (paged decode and prefill, the
block-scaled fp8 and grouped GEMMs): each the kernel function bit for bit, and captured in a CUDA
graph that, replayed after new inputs (values, group sizes, lengths) are written in place, gives
the kernel function's result on them.  A test whose kernel function `asyncdsl.kernels` does not
have is skipped, naming it.

Run:  python -m pytest tests/gpu/test_ops_gpu.py -v -rA
"""

from __future__ import annotations

from itertools import accumulate

import pytest
from gpu_support import hopper_or_skip

import asyncdsl.kernels

hopper_or_skip()
pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
ops = pytest.importorskip("asyncdsl.ops")
F = torch.nn.functional


def needs(*names: str) -> None:
    missing = [name for name in names if not hasattr(asyncdsl.kernels, name)]
    if missing:
        pytest.skip(f"asyncdsl.kernels has no {', '.join(missing)}")


def randn(*shape, seed: int, scale: float = 1.0) -> torch.Tensor:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    # The shape as one tuple: a loss's is (), and torch.randn(device=...) names no size.
    return torch.randn(shape, device="cuda", generator=generator, dtype=torch.float64) * scale


def labels(rows: int, vocab: int, seed: int) -> torch.Tensor:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    drawn = torch.randint(0, vocab, (rows,), device="cuda", generator=generator)
    return torch.where(torch.arange(rows, device="cuda") % 5 == 2, -100, drawn)


def errors(functions, reference, inputs) -> list[list[float]]:
    """For each of `functions`, the relative max errors of its output and input gradients on
    bf16 copies of `inputs` against `reference` (torch's own path) in float64, which runs once
    (integer inputs passed as they are)."""
    wide = [t.clone().requires_grad_() if t.is_floating_point() else t for t in inputs]
    want = reference(*wide)
    seed = randn(*want.shape, seed=99)
    floats = [i for i, t in enumerate(inputs) if t.is_floating_point()]
    want_grads = torch.autograd.grad(want, [wide[i] for i in floats], seed)
    found = []
    for function in functions:
        low = [t.detach().to(torch.bfloat16).requires_grad_() if t.is_floating_point() else t for t in inputs]
        got = function(*low)
        got_grads = torch.autograd.grad(got, [low[i] for i in floats], seed.to(got.dtype))
        found.append([((g.double() - w).abs().max() / w.abs().max()).item()
                      for g, w in zip((got, *got_grads), (want, *want_grads))])
    return found


def upcast(t: torch.Tensor) -> torch.Tensor:
    """Torch's own bf16 paths compute in float32; the float64 reference stays in float64."""
    return t if t.dtype == torch.float64 else t.float()


def no_worse(ours, torch_path, inputs, what: str) -> None:
    """Each error of `ours` at most twice torch's bf16 error (or 1e-3 of the largest value), both
    against `torch_path` in float64."""
    mine_all, theirs_all = errors((ours, torch_path), torch_path, inputs)
    for i, (mine, theirs) in enumerate(zip(mine_all, theirs_all)):
        assert mine <= max(2 * theirs, 1e-3), (
            f"{what}: output/gradient {i}: {mine:.2e} against torch's {theirs:.2e}")


ATTENTION = [  # (B, H, H_kv, S, D, causal, layout): grouped, ragged, every head dim
    (2, 8, 2, 1000, 128, True, "BSHD"), (1, 4, 4, 257, 64, False, "BHSD"),
    (1, 4, 1, 300, 192, True, "BHSD"), (2, 2, 2, 129, 256, False, "BSHD"), (1, 2, 2, 1, 128, True, "BHSD"),
]


@pytest.mark.parametrize("b, h, h_kv, s, d, causal, layout", ATTENTION)
def test_attention_gradients(b, h, h_kv, s, d, causal, layout):
    needs("attention_backward")
    shape = (lambda heads: (b, heads, s, d) if layout == "BHSD" else (b, s, heads, d))
    inputs = (randn(*shape(h), seed=1), randn(*shape(h_kv), seed=2), randn(*shape(h_kv), seed=3))
    def sdpa(q, k, v):
        if layout == "BSHD":
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=h != h_kv)
        return o if layout == "BHSD" else o.transpose(1, 2)

    no_worse(lambda q, k, v: ops.attention(q, k, v, causal=causal, layout=layout), sdpa, inputs,
             f"attention {b, h, h_kv, s, d, causal, layout}")


def test_varlen_attention_gradients():
    needs("attention_varlen", "attention_varlen_backward")
    lengths = [1, 300, 129, 1000, 64]  # some of one token, some longer than a block
    ends = torch.tensor([0, *lengths], device="cuda").cumsum(0).to(torch.int32)
    total = sum(lengths)
    inputs = (randn(total, 8, 128, seed=1), randn(total, 2, 128, seed=2), randn(total, 2, 128, seed=3))

    def per_sequence(q, k, v):
        outs = []
        for a, b in zip(ends.tolist(), ends.tolist()[1:]):
            one = [t[a:b].transpose(0, 1) for t in (q, k, v)]
            outs.append(F.scaled_dot_product_attention(*one, is_causal=True, enable_gqa=True).transpose(0, 1))
        return torch.cat(outs)

    no_worse(lambda q, k, v: ops.attention_varlen(q, k, v, ends, ends, 1000, 1000, causal=True), per_sequence,
             inputs, "attention_varlen")


def test_deterministic_attention_backward_is_bit_identical():
    needs("attention_backward")
    q, k, v = (randn(2, 1024, heads, 128, seed=s).to(torch.bfloat16).requires_grad_()
               for s, heads in ((1, 16), (2, 4), (3, 4)))
    do = randn(2, 1024, 16, 128, seed=4).to(torch.bfloat16)
    runs = []
    for _ in range(5):
        o = ops.attention(q, k, v, causal=True, layout="BSHD", deterministic=True)
        runs.append(torch.autograd.grad(o, (q, k, v), do))
    for run in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(run, runs[0]))


def test_norm_and_swiglu_gradients():
    needs("rms_norm_forward", "rms_norm_backward", "layer_norm_forward", "layer_norm_backward",
          "swiglu_backward")
    x, w, b = randn(4, 1000, 4096, seed=1), randn(4096, seed=2, scale=0.2) + 1, randn(4096, seed=3)

    def torch_rms(x, w):
        return (upcast(x) * torch.rsqrt(upcast(x).pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w

    no_worse(lambda x, w: ops.rms_norm(x, w, 1e-6), torch_rms, (x, w), "rms_norm")
    no_worse(ops.layer_norm, lambda x, w, b: F.layer_norm(x, (4096,), w, b), (x, w, b), "layer_norm")
    no_worse(ops.swiglu, lambda a, u: F.silu(a) * u, (randn(4000, 5632, seed=4), randn(4000, 5632, seed=5)),
             "swiglu")


def test_rotary_gradients():
    needs("rotary")
    half = torch.rand(2, 1000, 64, device="cuda", dtype=torch.float64,
                      generator=torch.Generator(device="cuda").manual_seed(5)) * 1000
    theta = torch.cat([half, half], -1)
    cos, sin = theta.cos().to(torch.bfloat16), theta.sin().to(torch.bfloat16)

    def transformers_rotary(q, k):  # apply_rotary_pos_emb on (B, S, H, D) tensors, flattened together
        c, s = cos[:, :, None].to(q.dtype), sin[:, :, None].to(q.dtype)
        def rotate_half(x):
            return torch.cat([-x[..., 64:], x[..., :64]], -1)
        return torch.cat([(x * c + rotate_half(x) * s).flatten() for x in (q, k)])

    no_worse(lambda q, k: torch.cat([x.flatten() for x in ops.rotary(q, k, cos, sin)]), transformers_rotary,
             (randn(2, 1000, 32, 128, seed=6), randn(2, 1000, 8, 128, seed=7)), "rotary")


def test_loss_gradients():
    needs("cross_entropy", "linear_cross_entropy")
    targets = labels(4096, 32000, 1)
    no_worse(lambda z, t: ops.cross_entropy(z, t), lambda z, t: F.cross_entropy(upcast(z), t),
             (randn(4096, 32000, seed=2, scale=2), targets), "cross_entropy")
    no_worse(lambda h, w, t: ops.linear_cross_entropy(h, w, t),
             lambda h, w, t: F.cross_entropy(upcast(h @ w.T), t),
             (randn(4096, 2048, seed=3), randn(32000, 2048, seed=4, scale=0.02), targets),
             "linear_cross_entropy")


def block_step(x, w, gate, up):
    """A forward and backward pass through the row operators: the gradients of x, w, gate and up."""
    y = ops.rms_norm(x, w) + ops.swiglu(gate, up)
    return torch.autograd.grad(y.float().square().sum(), (x, w, gate, up))


def test_a_training_step_is_captured_in_a_cuda_graph():
    needs("rms_norm_forward", "rms_norm_backward", "swiglu_backward")
    inputs = [randn(2048, 4096, seed=s).to(torch.bfloat16).requires_grad_() for s in range(4)]
    inputs[1] = inputs[1][0].detach().requires_grad_()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compile and load the kernels before the capture
        block_step(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = block_step(*inputs)
    with torch.no_grad():
        for s, tensor in enumerate(inputs):
            tensor.copy_(randn(*tensor.shape, seed=10 + s))
    graph.replay()
    for got, want in zip(captured, block_step(*inputs)):  # dw's partial sums may add in any order
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)


def test_compiled_with_cuda_graphs_matches_eager():
    needs("rms_norm_forward", "rms_norm_backward", "swiglu_backward", "attention_backward")

    def loss_of(q, k, v, w):
        o = ops.attention(q, k, v, causal=True, layout="BSHD")
        return ops.swiglu(ops.rms_norm(o, w), o).float().square().mean()

    inputs = [randn(2, 512, heads, 128, seed=s).to(torch.bfloat16).requires_grad_()
              for s, heads in ((1, 8), (2, 2), (3, 2))]
    inputs.append(randn(128, seed=4).to(torch.bfloat16).requires_grad_())
    compiled = torch.compile(loss_of, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):  # warm-up, record, replay (forward and backward graphs)
        got = torch.autograd.grad(compiled(*inputs), inputs)
    for g, w in zip(got, torch.autograd.grad(loss_of(*inputs), inputs)):
        torch.testing.assert_close(g, w, rtol=1e-2, atol=1e-2)


def test_a_small_llama_trains_as_transformers_does():
    needs("attention_backward", "rms_norm_forward", "rms_norm_backward", "swiglu_backward", "cross_entropy")
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=4,
                                      num_attention_heads=8, num_key_value_heads=2, vocab_size=4096)
    torch.manual_seed(0)
    with torch.device("cuda"):
        reference = transformers.LlamaForCausalLM._from_config(config, attn_implementation="sdpa",
                                                               dtype=torch.bfloat16)
        model = transformers.LlamaForCausalLM._from_config(config, attn_implementation="sdpa",
                                                           dtype=torch.bfloat16)
    model.load_state_dict(reference.state_dict())
    ops.llama.apply(model)
    generator = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(0, 4096, (2, 1024), device="cuda", generator=generator)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (reference, model)]
    for _ in range(5):
        losses = []
        for m, optimizer in zip((reference, model), optimizers):
            loss = m(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        assert abs(losses[1] / losses[0] - 1) < 0.01, losses


# The serving operators: the kernel functions bit for bit, and a CUDA graph replayed over new
# inputs written in place.  Each case makes its inputs for a step; the steps' shapes are the
# same, their values and their groups' sizes or sequences' lengths differ.

def fp8(*shape, seed: int) -> torch.Tensor:
    return (randn(*shape, seed=seed) * 2).to(torch.float8_e4m3fn)


def scales(*shape, seed: int) -> torch.Tensor:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.rand(shape, device="cuda", generator=generator) * 1.5 + 0.5


def bf16(*shape, seed: int) -> torch.Tensor:
    return randn(*shape, seed=seed).to(torch.bfloat16)


def int32(values) -> torch.Tensor:
    return torch.tensor(list(values), dtype=torch.int32, device="cuda")


def fp8_gemm(m: int, n: int, k: int, m_major: bool):
    def make(step: int):
        kb, s = -(-k // 128), 10 * step
        a_scales = scales(m, kb, seed=s + 3)
        if m_major:  # DeepGEMM's layout, read in place: the (K/128, M rounded up to 4) array transposed
            a_scales = torch.zeros(kb, -(-m // 4) * 4, device="cuda").t()[:m].copy_(a_scales)
        return fp8(m, k, seed=s + 1), a_scales, fp8(n, k, seed=s + 2), scales(-(-n // 128), kb, seed=s + 4)
    return make


def grouped(step: int):
    sizes = [[0, 300, 1, 699], [400, 0, 350, 0]][step]  # the second leaves rows past the groups
    a, b = bf16(1000, 256, seed=10 * step + 1), bf16(4, 256, 384, seed=10 * step + 2)
    return a, b, int32(accumulate(sizes))


def grouped_masked(step: int):
    counts = [[128, 0, 37, 1], [5, 128, 0, 100]][step]
    return bf16(4, 128, 256, seed=10 * step + 1), bf16(4, 256, 384, seed=10 * step + 2), int32(counts)


def grouped_fp8(step: int):
    sizes, s = [[0, 650, 50], [300, 300, 0]][step], 10 * step
    return (fp8(700, 512, seed=s + 1), scales(700, 4, seed=s + 2), fp8(3, 256, 512, seed=s + 3),
            scales(3, 2, 4, seed=s + 4), int32(accumulate(sizes)))


def grouped_fp8_masked(step: int):
    counts, s = [[128, 0, 65], [1, 128, 7]][step], 10 * step
    return (fp8(3, 128, 512, seed=s + 1), scales(3, 128, 4, seed=s + 2), fp8(3, 256, 512, seed=s + 3),
            scales(3, 2, 4, seed=s + 4), int32(counts))


def page_table(batch: int, max_pages: int, pages: int, seed: int) -> torch.Tensor:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randint(0, pages, (batch, max_pages), device="cuda", generator=generator, dtype=torch.int32)


def decode(step: int):
    lens, s = [[1, 500, 37, 1000], [1000, 1, 64, 300]][step], 10 * step
    return (bf16(4, 8, 128, seed=s + 1), bf16(256, 16, 2, 128, seed=s + 2), bf16(256, 16, 2, 128, seed=s + 3),
            page_table(4, 64, 256, s + 4), int32(lens))


def prefill(step: int):
    """Chunks of 1, 100 and 37 new tokens (then 100, 37 and 1) after their sequences' cached ones."""
    chunks, contexts, s = [[1, 100, 37], [100, 37, 1]][step], [[300, 100, 50], [150, 500, 1]][step], 10 * step
    return (bf16(138, 8, 128, seed=s + 1), bf16(64, 16, 2, 128, seed=s + 2), bf16(64, 16, 2, 128, seed=s + 3),
            page_table(3, 32, 64, s + 4), int32(contexts), int32(accumulate([0, *chunks])), 100)


SERVING = {  # name: (the operator's function, the kernel function, the inputs of a step)
    "gemm_fp8_blockscaled": (ops.gemm_fp8_blockscaled, asyncdsl.kernels.gemm_fp8_blockscaled,
                             fp8_gemm(300, 320, 528, m_major=False)),
    "gemm_fp8_blockscaled split K": (ops.gemm_fp8_blockscaled, asyncdsl.kernels.gemm_fp8_blockscaled,
                                     fp8_gemm(62, 256, 2048, m_major=True)),
    "grouped_gemm": (ops.grouped_gemm, asyncdsl.kernels.grouped_gemm, grouped),
    "grouped_gemm_masked": (ops.grouped_gemm_masked, asyncdsl.kernels.grouped_gemm_masked, grouped_masked),
    "grouped_gemm_fp8_blockscaled": (ops.grouped_gemm_fp8_blockscaled,
                                     asyncdsl.kernels.grouped_gemm_fp8_blockscaled, grouped_fp8),
    "grouped_gemm_fp8_blockscaled_masked": (ops.grouped_gemm_fp8_blockscaled_masked,
                                            asyncdsl.kernels.grouped_gemm_fp8_blockscaled_masked,
                                            grouped_fp8_masked),
    "paged_decode_attention": (ops.paged_decode_attention, asyncdsl.kernels.paged_decode_attention, decode),
    "paged_prefill": (ops.paged_prefill, asyncdsl.kernels.paged_prefill, prefill),
}


def covered(name: str, result, inputs) -> list[torch.Tensor]:
    """The parts of the outputs that the groups cover: the rest is never written."""
    outputs = list(result) if isinstance(result, tuple) else [result]
    if name.endswith("_masked"):
        return [c[g, :n] for c in outputs for g, n in enumerate(inputs[-1].tolist())]
    if name.startswith("grouped_gemm"):
        return [c[: inputs[-1][-1].item()] for c in outputs]
    return outputs


@pytest.mark.parametrize("name", SERVING)
def test_a_serving_operator_is_its_kernel_function(name):
    operator, function, make = SERVING[name]
    inputs = make(0)
    got, want = covered(name, operator(*inputs), inputs), covered(name, function(*inputs), inputs)
    assert len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want)), name


@pytest.mark.parametrize("name", SERVING)
def test_a_serving_operator_replays_in_a_cuda_graph_over_new_inputs(name):
    operator, function, make = SERVING[name]
    inputs = make(0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compile and load the kernels first
        operator(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = operator(*inputs)
    step = make(1)
    for tensor, value in zip(inputs, step):
        if isinstance(tensor, torch.Tensor):
            tensor.copy_(value)
    graph.replay()
    got, want = covered(name, captured, step), covered(name, function(*step), step)
    assert len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want)), name


def test_two_graphs_of_one_split_k_shape_replay_in_either_order():
    # Captured on torch's capture stream, each makes its split K workspace in its own memory pool:
    # the zeroing of its flags is recorded, done at its first replay, so the second graph cannot
    # borrow the first's (whose flags are not yet zeroed when the second replays first).
    operator, function, make = SERVING["gemm_fp8_blockscaled split K"]
    inputs = make(0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        operator(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    graphs, captured = [torch.cuda.CUDAGraph() for _ in range(2)], []
    for graph in graphs:
        with torch.cuda.graph(graph):
            captured.append(operator(*inputs))
    want = function(*inputs)
    for graph in reversed(graphs):
        graph.replay()
    torch.cuda.synchronize()
    assert all(torch.equal(c, want) for c in captured)
