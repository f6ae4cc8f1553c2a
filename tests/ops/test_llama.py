"""`asyncdsl.ops.llama.apply` on a small randomly initialised transformers Llama model, on the CPU
with the kernel functions by their float64 references (conftest.py): the same parameters under
the same names, the same loss and gradients as transformers' own SDPA model, one graph under
`torch.compile(fullgraph=True)`, and a clear error for what the kernels do not compute."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
loss_utils = pytest.importorskip("transformers.loss.loss_utils")  # a submodule `transformers` does not import

from asyncdsl.errors import ArgumentError  # noqa: E402
from asyncdsl.ops import llama  # noqa: E402

LAYERS = 2


def small_llama():
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=LAYERS,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
                                      max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM._from_config(config, attn_implementation="sdpa",
                                                      dtype=torch.float64)


def tokens(batch: int = 2, length: int = 24):
    return torch.randint(0, 100, (batch, length), generator=torch.Generator().manual_seed(1))


def assert_near(got, want, tolerance):
    """Within `tolerance` of want's largest element: the references keep float32 statistics."""
    assert (got - want).abs().max() <= tolerance * want.abs().max()


def loss_and_grads(model, ids):
    loss = model(input_ids=ids, labels=ids).loss
    return loss, torch.autograd.grad(loss, list(model.parameters()))


def test_apply_keeps_the_parameters_and_computes_what_transformers_does(reference_kernels):
    torch_model = small_llama()
    model = llama.apply(copy.deepcopy(torch_model))
    assert model.config._attn_implementation == "asyncdsl"
    kinds = [type(m).__name__ for m in model.modules()]
    assert kinds.count("RMSNorm") == 2 * LAYERS + 1 and kinds.count("SwiGLUMLP") == LAYERS
    assert "LlamaRMSNorm" not in kinds and "LlamaMLP" not in kinds
    assert list(model.state_dict()) == list(torch_model.state_dict())
    assert model.loss_function is llama.causal_lm_loss
    assert all(layer.self_attn.forward.__func__ is llama.attention_forward for layer in model.model.layers)
    ids = tokens()
    loss, grads = loss_and_grads(model, ids)
    want_loss, want_grads = loss_and_grads(torch_model, ids)
    assert_near(loss, want_loss, 1e-6)  # transformers' loss rounds the logits to float32
    for got, want in zip(grads, want_grads):
        assert_near(got, want, 1e-6)


def test_the_kv_cache_holds_what_transformers_puts_there(reference_kernels):
    # The rotated keys go into transformers' dynamic cache as its own forward puts them.
    torch_model = small_llama().eval()
    model = llama.apply(copy.deepcopy(torch_model))
    ids = tokens()
    with torch.no_grad():
        got, want = model(input_ids=ids, use_cache=True), torch_model(input_ids=ids, use_cache=True)
    assert_near(got.logits, want.logits, 1e-6)
    for layer in range(LAYERS):
        for name in ("keys", "values"):
            cached = getattr(got.past_key_values.layers[layer], name)
            assert_near(cached, getattr(want.past_key_values.layers[layer], name), 1e-6)


def test_mistrals_sliding_window_is_refused_and_other_head_dims_keep_transformers_rotary(reference_kernels):
    # Mistral keeps its window in the config, not the module: still refused, never ignored.
    config = transformers.MistralConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=1,
                                        num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
                                        sliding_window=4)
    mistral = llama.apply(transformers.MistralForCausalLM._from_config(config, dtype=torch.float64))
    with pytest.raises(ArgumentError, match="does not take sliding_window"):
        mistral(input_ids=tokens())
    # A head dim of 24 (not a power of two): transformers rotates, asyncdsl attends.
    config = transformers.LlamaConfig(hidden_size=96, intermediate_size=96, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
    torch_model = transformers.LlamaForCausalLM._from_config(config, attn_implementation="sdpa",
                                                             dtype=torch.float64)
    model = llama.apply(copy.deepcopy(torch_model))
    ids = tokens()
    assert_near(model(input_ids=ids).logits, torch_model(input_ids=ids).logits, 1e-6)


def test_without_rotary_the_attention_modules_keep_their_forward(reference_kernels):
    model = llama.apply(small_llama(), rotary=False)
    assert all("forward" not in vars(layer.self_attn) for layer in model.model.layers)
    model = llama.apply(small_llama(), attention=False)
    assert model.config._attn_implementation == "sdpa"
    assert all("forward" not in vars(layer.self_attn) for layer in model.model.layers)


def test_the_loss_follows_transformers_with_ignored_labels_and_a_count_of_items(reference_kernels):
    generator = torch.Generator().manual_seed(2)
    logits = torch.randn(2, 7, 30, generator=generator, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, 30, (2, 7), generator=generator)
    labels[0, :3] = -100
    for count in (None, torch.tensor(40), 17):
        got = llama.causal_lm_loss(logits, labels, 30, num_items_in_batch=count)
        want = loss_utils.ForCausalLMLoss(logits, labels, 30, num_items_in_batch=count)
        assert_near(got, want, 1e-6)
        assert_near(torch.autograd.grad(got, logits)[0], torch.autograd.grad(want, logits)[0], 1e-6)


def compiled_whole(model):
    """`model` under `torch.compile(fullgraph=True)`, and the operators each graph it made calls."""
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append({str(node.target) for node in graph_module.graph.nodes if node.op == "call_function"})
        return torch._dynamo.backends.debugging.aot_eager(graph_module, example_inputs)

    return torch.compile(model, fullgraph=True, backend=backend), graphs


def test_the_model_compiles_whole(reference_kernels):
    model = llama.apply(small_llama())
    ids = tokens()
    eager_loss, eager_grads = loss_and_grads(model, ids)
    compiled, graphs = compiled_whole(model)
    loss, grads = loss_and_grads(compiled, ids)
    assert len(graphs) == 1
    called = graphs[0]
    assert {"asyncdsl.attention.default", "asyncdsl.rotary.default", "asyncdsl.rms_norm.default",
            "asyncdsl.swiglu.default", "asyncdsl.cross_entropy.default"} <= called
    torch.testing.assert_close(loss, eager_loss, rtol=1e-12, atol=0)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_the_linear_loss_gives_transformers_loss_and_gradients_without_logits(reference_kernels):
    torch_model = small_llama()
    model = llama.apply(copy.deepcopy(torch_model), linear_loss=True)
    ids = tokens()
    labels = ids.clone()
    labels[0, :5] = -100
    for count in (None, 37):
        output = model(input_ids=ids, labels=labels, num_items_in_batch=count)
        want = torch_model(input_ids=ids, labels=labels, num_items_in_batch=count).loss
        assert output.logits is None
        assert_near(output.loss, want, 1e-6)
        grads = torch.autograd.grad(output.loss, list(model.parameters()))
        want_grads = torch.autograd.grad(want, list(torch_model.parameters()))
        for got, expected in zip(grads, want_grads):
            assert_near(got, expected, 1e-6)
    with torch.no_grad():  # without labels: the logits, as transformers gives them
        assert_near(model(input_ids=ids).logits, torch_model(input_ids=ids).logits, 1e-6)


def test_the_linear_loss_compiles_whole_and_refuses_a_head_with_bias(reference_kernels):
    model = llama.apply(small_llama(), linear_loss=True)
    ids = tokens()
    eager_loss, _ = loss_and_grads(model, ids)
    compiled, graphs = compiled_whole(model)
    loss, _ = loss_and_grads(compiled, ids)
    assert len(graphs) == 1 and "asyncdsl.linear_cross_entropy.default" in graphs[0]
    torch.testing.assert_close(loss, eager_loss, rtol=1e-12, atol=0)
    biased = small_llama()
    biased.lm_head = torch.nn.Linear(64, 100, bias=True, dtype=torch.float64)
    with pytest.raises(ArgumentError, match="without bias") as error:
        llama.apply(biased, linear_loss=True)
    assert error.value.location.file == __file__


def test_packed_sequences_attend_each_to_itself(reference_kernels):
    model = llama.apply(small_llama())
    ids = tokens(1, 24)
    with torch.no_grad():
        packed = model(input_ids=ids, position_ids=torch.cat([torch.arange(10), torch.arange(14)])[None],
                       cu_seq_lens_q=torch.tensor([0, 10, 24], dtype=torch.int32),
                       cu_seq_lens_k=torch.tensor([0, 10, 24], dtype=torch.int32), max_length_q=14,
                       max_length_k=14).logits
        alone = [model(input_ids=ids[:, :10]).logits, model(input_ids=ids[:, 10:]).logits]
    assert_near(packed, torch.cat(alone, 1), 1e-12)


def test_sequences_packed_by_their_positions_alone_attend_each_to_itself(reference_kernels):
    # The flattening collator's default: position_ids that restart, no lengths.  transformers' masks
    # keep each sequence to itself; asyncdsl's attention attended across them.
    torch_model = small_llama()
    model = llama.apply(copy.deepcopy(torch_model))
    ids = tokens()
    one_row = torch.cat([torch.arange(10), torch.arange(14)])[None]
    two_rows = torch.stack([one_row[0], torch.cat([torch.arange(5), torch.arange(7), torch.arange(12)])])
    for rows, positions in ((ids[:1], one_row), (ids, two_rows)):
        inputs = {"input_ids": rows, "position_ids": positions, "labels": rows, "use_cache": False}
        got, want = model(**inputs), torch_model(**inputs)
        assert_near(got.logits, want.logits, 1e-6)
        assert_near(got.loss, want.loss, 1e-6)
        grads = torch.autograd.grad(got.loss, list(model.parameters()))
        want_grads = torch.autograd.grad(want.loss, list(torch_model.parameters()))
        for got_grad, want_grad in zip(grads, want_grads):
            assert_near(got_grad, want_grad, 1e-6)
    with torch.no_grad():
        alone = [model(input_ids=ids[:1, :10]).logits, model(input_ids=ids[:1, 10:]).logits]
        assert_near(model(input_ids=ids[:1], position_ids=one_row).logits, torch.cat(alone, 1), 1e-12)


def test_a_classification_head_keeps_its_loss(reference_kernels):
    # Its loss_function takes other arguments, for another loss: not the causal LM's.
    config = small_llama().config
    config.num_labels, config.pad_token_id = 3, 0
    torch.manual_seed(0)
    torch_model = transformers.LlamaForSequenceClassification._from_config(
        config, attn_implementation="sdpa", dtype=torch.float64)
    model = llama.apply(copy.deepcopy(torch_model))
    ids, labels = tokens(), torch.tensor([0, 2])
    want = torch_model(input_ids=ids, labels=labels).loss
    assert_near(model(input_ids=ids, labels=labels).loss, want, 1e-6)


def test_what_the_kernels_do_not_compute_is_refused(reference_kernels):
    model = llama.apply(small_llama())
    ids = tokens()
    padded = torch.ones_like(ids)
    padded[0, :5] = 0
    with pytest.raises(ArgumentError, match="does not take a padding mask") as error:
        model(input_ids=ids, attention_mask=padded)
    assert error.value.location.file == __file__  # the model's caller, not transformers' attention module
    model(input_ids=ids, attention_mask=torch.ones_like(ids))  # no padding: no mask
    q = torch.zeros(1, 4, 3, 16)
    with pytest.raises(ArgumentError, match=r"scale 0.5 \(asyncdsl's is 1/sqrt\(16\)\).*causal attention of "
                                            "3 queries over 5 keys"):
        llama.attention_function(model.model.layers[0].self_attn, q, torch.zeros(1, 2, 5, 16),
                                 torch.zeros(1, 2, 5, 16), None, scaling=0.5)
