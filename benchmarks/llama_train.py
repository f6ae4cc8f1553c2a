"""Training steps of a transformers `LlamaForCausalLM` of about 1.1 B parameters (hidden 2048, 16
layers, 32 query and 8 key/value heads, MLP 8192, vocabulary 32000), randomly initialised, bf16,
AdamW, sequences of 4096 tokens: the model on asyncdsl's operators (`asyncdsl.ops.llama.apply`:
attention, RMSNorm, SwiGLU, the loss; "+linear_loss": the last layer and its loss in one operator)
against transformers' own with torch's SDPA, eager and under `torch.compile`, and asyncdsl's under
`torch.compile` too.  Every variant starts from the same
weights (one state dict) and takes the same seeded random batches, so their losses differ only
by the operators' rounding: printed per step with the relative difference from eager SDPA's.

Step time is CUDA events around forward, backward, gradient clipping and the optimizer step; the
median over the steps after WARMUP (the first ones compile) gives tokens/s.  Peak memory is
`torch.cuda.max_memory_allocated()` over the steps, reset after the model and optimizer exist.
Each variant runs in the same process one after another, its model freed before the next.

    python benchmarks/llama_train.py [--steps 30] [--batch 1] [--variants sdpa,compile,asyncdsl,...]
                                     [--save-workload llama.workload]
"""

from __future__ import annotations

import argparse
import copy
import gc
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import write_result  # noqa: E402

VARIANTS = ("sdpa", "compile", "asyncdsl", "asyncdsl+linear_loss", "asyncdsl+compile")
CONFIG = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
              num_key_value_heads=8, vocab_size=32000, max_position_embeddings=4096, hidden_act="silu")
SEQUENCE = 4096
WARMUP = 10


def initial_state(config) -> dict:
    """The seeded random weights every variant starts from, on the host."""
    import torch
    import transformers

    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM._from_config(config, dtype=torch.bfloat16)
    return {name: tensor.cpu() for name, tensor in model.state_dict().items()}


def variant_model(config, state: dict, variant: str):
    import torch
    import transformers

    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM._from_config(config, attn_implementation="sdpa",
                                                           dtype=torch.bfloat16)
    model.load_state_dict(state)
    model.train()
    if variant.startswith("asyncdsl"):
        import asyncdsl.ops

        asyncdsl.ops.llama.apply(model, linear_loss="+linear_loss" in variant)
    return torch.compile(model) if variant.endswith("compile") else model


def batches(steps: int, batch: int, vocab: int) -> list:
    import torch

    generator = torch.Generator(device="cuda").manual_seed(1)
    return [torch.randint(0, vocab, (batch, SEQUENCE), device="cuda", generator=generator)
            for _ in range(steps)]


def train(model, inputs: list) -> dict:
    """The losses, step times (ms) and peak memory of one training step per batch of `inputs`."""
    import torch

    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=3e-4, weight_decay=0.1, fused=True)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    losses, events = [], []
    for ids in inputs:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss  # training: no KV cache to fill
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        stop.record()
        losses.append(loss.detach())
        events.append((start, stop))
    torch.cuda.synchronize()
    return {"losses": [loss.item() for loss in losses],
            "step_ms": [start.elapsed_time(stop) for start, stop in events],
            "peak_GiB": torch.cuda.max_memory_allocated() / 2**30}


def main(argv: list[str]) -> None:
    import torch
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--save-workload", metavar="PATH",
                        help="write the asyncdsl kernels the steps compiled (asyncdsl.save_workload), for "
                             "benchmarks/first_call.py --workload")
    args = parser.parse_args(argv)
    chosen = args.variants.split(",")
    if unknown := sorted(set(chosen) - set(VARIANTS)):
        parser.error(f"unknown variants {unknown}; there are {', '.join(VARIANTS)}")
    if not torch.cuda.is_available():
        print("llama_train: no GPU, nothing measured")
        return
    config = transformers.LlamaConfig(**CONFIG)
    state = initial_state(config)
    inputs = batches(args.steps, args.batch, config.vocab_size)
    tokens = args.batch * SEQUENCE
    runs, failures = {}, {}
    for variant in chosen:
        torch._dynamo.reset()
        try:
            model = variant_model(copy.deepcopy(config), state, variant)  # models set their config's fields
            run = train(model, inputs)
            if bad := [step for step, loss in enumerate(run["losses"]) if not math.isfinite(loss)]:
                raise FloatingPointError(f"the loss is not finite at steps {bad}")
            runs[variant] = run
        except Exception as error:  # a variant that cannot run is reported, the others still measured
            failures[variant] = f"{type(error).__name__}: {error}"
            print(f"{variant}: failed: {failures[variant]}")
        model = None
        gc.collect()  # an operator bound to the model (a patched forward) makes a cycle
        torch.cuda.empty_cache()
    if args.save_workload:
        import asyncdsl

        written = asyncdsl.save_workload(args.save_workload)  # less what a file cannot name (warned)
        print(f"{len(written)} asyncdsl kernels written to {args.save_workload}")
    reference = runs.get("sdpa")
    print(f"{'step':>4} " + " ".join(f"{name:>22}" for name in runs))
    for step in range(args.steps):
        cells = []
        for run in runs.values():
            loss = run["losses"][step]
            delta = "" if reference is None else f" ({loss / reference['losses'][step] - 1:+.2%})"
            cells.append(f"{loss:.4f}{delta}".rjust(22))
        print(f"{step:>4} " + " ".join(cells))
    payload = {"steps": args.steps, "batch": args.batch, "sequence": SEQUENCE, "config": CONFIG}
    for name, run in runs.items():
        median_ms = statistics.median(run["step_ms"][WARMUP:] or run["step_ms"])
        summary = {"tokens/s": tokens / median_ms * 1e3, "step ms": median_ms,
                   "peak memory GiB": run["peak_GiB"], "first step ms": run["step_ms"][0],
                   "losses": run["losses"]}
        if reference is not None:
            summary["max relative loss difference from sdpa"] = max(
                abs(a / b - 1) for a, b in zip(run["losses"], reference["losses"]))
        payload[name] = summary
        print(f"{name:>18}: {summary['tokens/s']:9.0f} tokens/s, step {median_ms:7.1f} ms, peak "
              f"{run['peak_GiB']:6.2f} GiB, first step {run['step_ms'][0] / 1e3:6.1f} s"
              + (f", losses within {summary['max relative loss difference from sdpa']:.3%} of sdpa"
                 if reference is not None else ""))
    for name in runs:
        for peer in ("sdpa", "compile"):
            if peer in runs and name != peer:
                payload[f"{name} / {peer} (tokens/s)"] = payload[name]["tokens/s"] / payload[peer]["tokens/s"]
                payload[f"{name} / {peer} (peak memory)"] = runs[name]["peak_GiB"] / runs[peer]["peak_GiB"]
    if failures:
        payload["failed"] = failures
    print(f"wrote {write_result('llama_train', payload)}")
    if failures:
        sys.exit(f"llama_train: {len(failures)} variant(s) failed: {', '.join(failures)}")


if __name__ == "__main__":
    main(sys.argv[1:])
