"""transformers' Llama-family models on asyncdsl's operators, in one call:

    model = transformers.LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16)
    asyncdsl.ops.llama.apply(model)

`apply` registers `attention_function` in transformers' attention-function registry under the name
"asyncdsl" (with the flash-attention mask function, which gives no mask for a batch without
padding) and selects it for the model, and gives each attention module `attention_forward`, which
rotates its queries and keys in one kernel (`asyncdsl.ops.rotary`) where transformers makes about
ten elementwise passes forward and as many backward; it replaces each RMSNorm module by `RMSNorm`
and each gated MLP by `SwiGLUMLP`, which keep the same parameters under the same names, so
checkpoints load and save as before; and it makes `causal_lm_loss` a causal language model's loss
function, the cross-entropy of the bf16 logits without the float32 copy transformers' own makes.  With
`linear_loss=True` a call given labels computes the last layer and its loss in one operator
instead (`asyncdsl.ops.linear_cross_entropy`): the (tokens x vocabulary) logits and their gradient
are never made, and the output's logits are None.  The families whose modules compute what Llama's
do: Llama, Mistral, Qwen2.
transformers is imported by `apply` only.
"""

from __future__ import annotations

import types
import weakref

import torch

from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.kernels.rotary import takes_head_dim
from asyncdsl.ops.attention import attention as asyncdsl_attention
from asyncdsl.ops.attention_varlen import attention_varlen
from asyncdsl.ops.cross_entropy import cross_entropy
from asyncdsl.ops.linear_cross_entropy import linear_cross_entropy
from asyncdsl.ops.rms_norm import rms_norm
from asyncdsl.ops.rotary import rotary as rotary_embedding
from asyncdsl.ops.swiglu import swiglu

NAME = "asyncdsl"
NORMS = ("LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm")
ATTENTIONS = ("LlamaAttention", "MistralAttention", "Qwen2Attention")
# The names transformers versions give the attention module's KV-cache argument.
CACHES = ("cache", "past_key_values", "past_key_value")
MLPS = ("LlamaMLP", "MistralMLP", "Qwen2MLP")
# Options of transformers' attention call that change what it computes, which this one refuses.
REFUSED = ("sliding_window", "softcap", "s_aux")


def apply(model: torch.nn.Module, *, attention: bool = True, rotary: bool = True, norms: bool = True,
          mlp: bool = True, loss: bool = True, linear_loss: bool = False) -> torch.nn.Module:
    """Put `model` (a transformers Llama-family model) on asyncdsl's operators, in place: its
    attention (`attention`) and with it the rotary embedding of the queries and keys (`rotary`), its
    RMSNorm modules (`norms`), the gate of its MLPs (`mlp`) and, for a causal language model,
    its loss (`loss`), or its last layer and loss in one operator (`linear_loss`).  Returns the
    model."""
    if attention:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

        AttentionInterface.register(NAME, attention_function)
        AttentionMaskInterface.register(NAME, flash_attention_mask)
        model.set_attn_implementation(NAME)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            kind = type(child).__name__
            if attention and rotary and kind in ATTENTIONS:
                child.forward = types.MethodType(attention_forward, child)
            elif norms and kind in NORMS:
                setattr(parent, name, RMSNorm(child.weight, child.variance_epsilon))
            elif mlp and kind in MLPS:
                if child.config.hidden_act != "silu":
                    raise ArgumentError(f"{kind} {name!r} gates with {child.config.hidden_act!r}; asyncdsl's "
                                        "SwiGLU gates with silu", user_location())
                setattr(parent, name, SwiGLUMLP(child.gate_proj, child.up_proj, child.down_proj))
    # Only a causal language model's: the classification and question-answering heads call their
    # loss_function with other arguments, for another loss.
    if loss and getattr(model, "loss_type", None) == "ForCausalLM":
        model.loss_function = causal_lm_loss
    if linear_loss:
        head = getattr(model, "lm_head", None)
        if not isinstance(head, torch.nn.Linear) or head.bias is not None:
            raise ArgumentError(f"linear_loss takes a causal language model whose lm_head is a Linear layer "
                                f"without bias; {type(model).__name__} has {head!r}", user_location())
        model.forward = types.MethodType(linear_loss_forward, model)
    return model


def linear_loss_forward(model: torch.nn.Module, *args, labels: torch.Tensor | None = None,
                        num_items_in_batch: torch.Tensor | int | None = None,
                        shift_labels: torch.Tensor | None = None, ignore_index: int = -100, **kwargs):
    """The causal language model's forward with labels: the decoder's last hidden states through
    `lm_head` into the loss by `asyncdsl.ops.linear_cross_entropy`, labels shifted as
    `causal_lm_loss` shifts them; the output's logits are None.  Without labels, transformers'
    own forward (the logits, for generation and evaluation)."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    if labels is None and shift_labels is None:
        return type(model).forward(model, *args, **kwargs)
    kwargs.pop("logits_to_keep", None)
    outputs = model.model(*args, **kwargs)
    hidden = outputs.last_hidden_state
    rows = hidden.reshape(-1, hidden.shape[-1])
    loss = next_token_loss(
        lambda targets, reduction: linear_cross_entropy(rows, model.lm_head.weight, targets,
                                                        ignore_index=ignore_index, reduction=reduction),
        labels, shift_labels, num_items_in_batch, ignore_index, hidden.device)
    return CausalLMOutputWithPast(loss=loss, logits=None, past_key_values=outputs.past_key_values,
                                  hidden_states=outputs.hidden_states, attentions=outputs.attentions)


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor, vocab_size: int,
                   num_items_in_batch: torch.Tensor | int | None = None, ignore_index: int = -100,
                   shift_labels: torch.Tensor | None = None, **kwargs) -> torch.Tensor:
    """transformers' causal language-model loss on `asyncdsl.ops.cross_entropy`: each token's
    logits against the next token's label (`labels` shifted left, the last position ignored,
    unless `shift_labels` are given), the mean over the labels not `ignore_index`, or the sum
    divided by `num_items_in_batch` when given (batches accumulated over several steps)."""
    rows = logits.reshape(-1, vocab_size)
    return next_token_loss(
        lambda targets, reduction: cross_entropy(rows, targets, ignore_index=ignore_index,
                                                 reduction=reduction),
        labels, shift_labels, num_items_in_batch, ignore_index, logits.device)


def next_token_loss(loss_of, labels: torch.Tensor | None, shift_labels: torch.Tensor | None,
                    num_items_in_batch: torch.Tensor | int | None, ignore_index: int,
                    device: torch.device) -> torch.Tensor:
    """transformers' causal language-model reduction around `loss_of(targets, reduction)`: the
    targets are `labels` shifted left, the last position `ignore_index` (or `shift_labels`),
    flattened onto `device`; the mean over the targets not ignored, or the sum divided by
    `num_items_in_batch` when given."""
    if shift_labels is None:
        shift_labels = torch.nn.functional.pad(labels, (0, 1), value=ignore_index)[..., 1:]
    targets = shift_labels.reshape(-1).to(device)
    if num_items_in_batch is None:
        return loss_of(targets, "mean")
    total = loss_of(targets, "sum")
    if isinstance(num_items_in_batch, torch.Tensor):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch


def attention_function(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                       value: torch.Tensor, attention_mask: torch.Tensor | None, scaling: float | None = None,
                       dropout: float = 0.0, **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention call on `asyncdsl.ops.attention`: query (B, H, S, D) and key, value
    (B, H_kv, S_kv, D) after the rotary embedding; returns the output (B, S, H, D) and no weights.
    Sequences packed into one row (B = 1) with `cu_seq_lens_q`, `cu_seq_lens_k`, `max_length_q`
    and `max_length_k` (transformers' flattening collator) go to `asyncdsl.ops.attention_varlen`,
    and so do rows whose `position_ids` restart (`sequences_of_positions`), outside torch.compile.
    Refuses what the kernels do not compute: padding masks, dropout, another scale than 1/√D,
    sliding windows, soft caps, and causal attention of fewer queries than keys."""
    d = query.shape[-1]
    is_causal = kwargs.get("is_causal")  # None, given or not: the module's own, as transformers reads it
    causal = bool(getattr(module, "is_causal", True) if is_causal is None else is_causal)
    refused = [option for option in REFUSED if kwargs.get(option) is not None]
    if attention_mask is not None:
        refused.append("a padding mask")
    if dropout:
        refused.append(f"dropout {dropout}")
    if scaling is not None and abs(scaling * d**0.5 - 1) > 1e-6:
        refused.append(f"scale {scaling} (asyncdsl's is 1/sqrt({d}))")
    packed = kwargs.get("cu_seq_lens_q") is not None
    if packed and query.shape[0] != 1:
        refused.append(f"packed sequences in a batch of {query.shape[0]} rows (they come in one)")
    # Rows whose positions restart hold several sequences (the flattening collator's default gives
    # position_ids only): transformers' masks and FlashAttention keep each sequence to itself.
    by_positions = None
    if not packed and attention_mask is None and query.shape[2] == key.shape[2]:
        by_positions = sequences_of_positions(kwargs.get("position_ids"), query.shape[0], query.shape[2])
    if causal and query.shape[2] != key.shape[2] and not packed:
        refused.append(f"causal attention of {query.shape[2]} queries over {key.shape[2]} keys")
    if refused:
        raise ArgumentError(f"asyncdsl's attention does not take {', '.join(refused)}",
                            # the line that called the model, not transformers' that called this
                            user_location(packages=("transformers",)))
    if packed or by_positions is not None:
        ends_q, ends_k, longest_q, longest_k = by_positions or (
            kwargs["cu_seq_lens_q"], kwargs["cu_seq_lens_k"], kwargs["max_length_q"], kwargs["max_length_k"])
        # (B, H, S, D) to the rows end to end, (B * S, H, D), and back as (B, S, H, D).
        q, k, v = (x.transpose(1, 2).reshape(-1, *x.shape[1::2]) for x in (query, key, value))
        o = attention_varlen(q, k, v, ends_q, ends_k, longest_q, longest_k, causal=causal)
        return o.view(query.shape[0], query.shape[2], *o.shape[1:]), None
    # transformers' projections are (B, S, H, D) seen transposed: read them in place where they are.
    if query.transpose(1, 2).is_contiguous():
        q, k, v = (x.transpose(1, 2) for x in (query, key, value))
        return asyncdsl_attention(q, k, v, causal=causal, layout="BSHD"), None
    return asyncdsl_attention(query, key, value, causal=causal).transpose(1, 2), None


# The last position_ids read and their sequences: the layers of a call share one tensor, read once.
_last_positions: list = [None, None, None]  # [weak reference, (version, batch), sequences]


def sequences_of_positions(positions: torch.Tensor | None, batch: int,
                           length: int) -> tuple[torch.Tensor, torch.Tensor, int, int] | None:
    """The boundaries of the sequences packed in the `batch` rows of `length` tokens where
    `positions` (B or 1, length) restart (a position not one past the last begins a sequence, as
    transformers' masks read them), for `attention_varlen` over the rows end to end:
    (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k).  None where each row is one
    sequence, where `positions` is not of that shape, and under `torch.compile`, which cannot
    read them (packed sequences are then given by their lengths, `cu_seq_lens_q` and the rest)."""
    if (positions is None or positions.dim() != 2 or positions.shape[0] not in (1, batch)
            or positions.shape[1] != length or length == 1 or torch.compiler.is_compiling()):
        return None
    reference, key, known = _last_positions
    if reference is not None and reference() is positions and key == (positions._version, batch):
        return known
    rows = positions.expand(batch, -1)
    starts = torch.diff(rows, dim=-1, prepend=rows[:, :1] - 1) != 1
    starts[:, 0] = True
    found = None
    if int(starts.sum()) > batch:  # the one read of the positions by the host, for all layers
        total = torch.tensor([starts.numel()], device=starts.device)
        ends = torch.cat([starts.reshape(-1).nonzero().flatten(), total]).to(torch.int32)
        longest = int(ends.diff().max())
        found = (ends, ends, longest, longest)
    _last_positions[:] = weakref.ref(positions), (positions._version, batch), found
    return found


def attention_forward(module: torch.nn.Module, hidden_states: torch.Tensor,
                      position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
                      attention_mask: torch.Tensor | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """A Llama-family attention module's forward with its queries and keys rotated by
    `asyncdsl.ops.rotary`, in the (B, S, H, D) layout the projections leave them in, then
    `attention_function` and the output projection: what transformers' forward computes.  The
    module's own forward runs where the model's attention is no longer asyncdsl's or a KV cache
    other than the dynamic one is given (the others place keys by the version's own arguments), and
    where the head dim is not one the rotary kernel takes (`kernels.rotary.takes_head_dim`)."""
    cache = next((kwargs[name] for name in CACHES if kwargs.get(name) is not None), None)
    if (position_embeddings is None or module.config._attn_implementation != NAME
            or not takes_head_dim(module.head_dim)
            or (cache is not None and type(cache).__name__ != "DynamicCache")):
        return type(module).forward(module, hidden_states, position_embeddings, attention_mask, **kwargs)
    heads = (*hidden_states.shape[:-1], -1, module.head_dim)
    projections = (module.q_proj, module.k_proj, module.v_proj)
    q, k, v = (project(hidden_states).view(heads) for project in projections)
    q, k = rotary_embedding(q, k, *position_embeddings)
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # transformers' (B, H, S, D) views
    if cache is not None:
        k, v = cache.update(k, v, module.layer_idx)
    # The window as the module's own forward passes it: Qwen2's module has one, Mistral's config.
    window = (module.sliding_window if hasattr(module, "sliding_window")
              else getattr(module.config, "sliding_window", None))
    options = {"sliding_window": window, **kwargs}
    o, _ = attention_function(module, q, k, v, attention_mask, scaling=module.scaling,
                              dropout=module.attention_dropout if module.training else 0.0, **options)
    return module.o_proj(o.reshape(*hidden_states.shape[:-1], -1)), None


class RMSNorm(torch.nn.Module):
    """Llama's RMSNorm on `asyncdsl.ops.rms_norm`, with its parameter and attribute names."""

    def __init__(self, weight: torch.nn.Parameter, eps: float):
        super().__init__()
        self.weight = weight
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.variance_epsilon)


class SwiGLUMLP(torch.nn.Module):
    """Llama's MLP, down(silu(gate(x)) · up(x)), with the gate on `asyncdsl.ops.swiglu`."""

    def __init__(self, gate_proj: torch.nn.Module, up_proj: torch.nn.Module, down_proj: torch.nn.Module):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = gate_proj, up_proj, down_proj

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(swiglu(self.gate_proj(x), self.up_proj(x)))
