"""Run the pinned peers on a grid and write tests/reference/peers_<peer>.json (not run by CI).

Run with the python of the venv tools/peers/install.sh made:
    /tmp/derive-peers-venv/bin/python tools/peers/generate.py [--out tests/reference] [--peer NAME]
Models are built from dict configs on the meta device (no weights, no downloads); the small
``tiny-*`` models are built on the CPU so the tools that need real tensors can run them.
Every record holds the exact call (function and keyword arguments) and every number it returned.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import json
import platform
from pathlib import Path

import torch

# ---- the models, as dict configs (derive's presets and a few from_config shapes) ----

LLAMA = dict(family="llama", tie=False)
MODELS: dict[str, dict] = {
    "llama3-8b": dict(LLAMA, layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256, seq=8192),
    "llama3-70b": dict(LLAMA, layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256, seq=8192),
    "llama3-405b": dict(LLAMA, layers=126, hidden=16384, heads=128, kv_heads=8, ffn=53248, vocab=128256,
                        seq=8192),
    "gpt3-175b": dict(family="gpt", tie=True, layers=96, hidden=12288, heads=96, kv_heads=96, ffn=49152,
                      vocab=50257, seq=2048),
    "gpt3-1.3b": dict(family="gpt", tie=True, layers=24, hidden=2048, heads=16, kv_heads=16, ffn=8192,
                      vocab=50257, seq=2048),
    "tiny-llama": dict(LLAMA, layers=2, hidden=256, heads=8, kv_heads=2, ffn=688, vocab=1000, seq=64),
    "tiny-llama-mha": dict(LLAMA, layers=3, hidden=128, heads=4, kv_heads=4, ffn=320, vocab=512, seq=32),
    "tiny-gpt": dict(family="gpt", tie=True, layers=2, hidden=128, heads=4, kv_heads=4, ffn=512, vocab=1000,
                     seq=64),
}
BIG = ("llama3-8b", "llama3-70b", "llama3-405b", "gpt3-175b", "gpt3-1.3b")
TINY = ("tiny-llama", "tiny-llama-mha", "tiny-gpt")


def hf_config(name: str, attn: str = "eager"):
    """The transformers config of ``name``: LlamaConfig or GPT2Config (GPT-3's layout)."""
    import transformers
    m = MODELS[name]
    if m["family"] == "llama":
        return transformers.LlamaConfig(
            vocab_size=m["vocab"], hidden_size=m["hidden"], intermediate_size=m["ffn"],
            num_hidden_layers=m["layers"], num_attention_heads=m["heads"],
            num_key_value_heads=m["kv_heads"], max_position_embeddings=m["seq"],
            tie_word_embeddings=m["tie"], attn_implementation=attn)
    return transformers.GPT2Config(
        vocab_size=m["vocab"], n_embd=m["hidden"], n_layer=m["layers"], n_head=m["heads"],
        n_inner=m["ffn"], n_positions=m["seq"], activation_function="gelu_new",
        bos_token_id=0, eos_token_id=0, attn_implementation=attn)


def hf_model(name: str, auto: str = "AutoModelForCausalLM", device: str = "meta", attn: str = "eager"):
    """An HF model of ``name`` from its dict config: fp32, on ``device`` (meta: no memory)."""
    import transformers
    config = hf_config(name, attn)
    with torch.device(device):
        model = getattr(transformers, auto).from_config(config, dtype=torch.float32)
    return model


def record(call: str, kwargs: dict, result, **extra) -> dict:
    """One reference record: the call, its keyword arguments, what it returned, and context."""
    return {"call": call, "kwargs": kwargs, "result": result, **extra}


# ---- DeepSpeed: ZeRO-2 / ZeRO-3 model-state estimators ----

def deepspeed_records() -> list[dict]:
    from deepspeed.runtime.zero import stage3, stage_1_and_2
    out = []
    for name in BIG + TINY:
        device = "cpu" if name in TINY else "meta"
        model = hf_model(name, device=device)
        # model_to_params dedups by data_ptr, which is 0 for every meta tensor: count by identity
        # there (what the real-memory call returns), and call the tool itself on the CPU models.
        total = sum(p.numel() for p in model.parameters())
        largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
        if device == "cpu":
            live = stage3.model_to_params(model)
            out.append(record("deepspeed.runtime.zero.stage3.model_to_params",
                              {"model": f"{name} (AutoModelForCausalLM, cpu)"},
                              {"total_params": live[0], "largest_layer_params": live[1]}, model=name))
            out.append(record("deepspeed.runtime.zero.stage_1_and_2.model_to_params",
                              {"model": f"{name} (AutoModelForCausalLM, cpu)"},
                              {"total_params": stage_1_and_2.model_to_params(model)}, model=name))
        else:
            out.append(record("model.parameters() / model.modules() on the meta device",
                              {"model": f"{name} (AutoModelForCausalLM, meta)"},
                              {"total_params": total, "largest_layer_params": largest}, model=name))
        for gpus in (1, 4, 8):
            for nodes in (1, 2, 16):
                for offload in (True, False):
                    kwargs = dict(total_params=total, num_gpus_per_node=gpus, num_nodes=nodes,
                                  cpu_offload=offload, additional_buffer_factor=1.5)
                    cpu, gpu = stage_1_and_2.estimate_zero2_model_states_mem_needs(**kwargs)
                    out.append(record("deepspeed.runtime.zero.stage_1_and_2."
                                      "estimate_zero2_model_states_mem_needs", kwargs,
                                      {"cpu_mem": cpu, "gpu_mem": gpu}, model=name, stage=2))
                for offload, params in ((True, True), (True, False), (False, False)):
                    for zero_init in (True, False):
                        kwargs = dict(total_params=total, largest_layer_params=largest,
                                      num_gpus_per_node=gpus, num_nodes=nodes, cpu_offload=offload,
                                      cpu_offload_params=params, zero_init=zero_init,
                                      additional_buffer_factor=1.5)
                        cpu, gpu, layer = stage3.estimate_zero3_model_states_mem_needs(**kwargs)
                        out.append(record("deepspeed.runtime.zero.stage3."
                                          "estimate_zero3_model_states_mem_needs", kwargs,
                                          {"cpu_mem": cpu, "gpu_mem": gpu,
                                           "largest_layer_memory": layer}, model=name, stage=3))
        del model
    return out


# ---- accelerate: estimate-memory (gather_data with the CLI's AutoModel, built locally) ----

def accelerate_records() -> list[dict]:
    from types import SimpleNamespace

    from accelerate.commands import estimate
    from accelerate.utils import calculate_maximum_sizes
    out = []
    for name in BIG + TINY:
        # the CLI builds AutoModel.from_config(config, torch_dtype=float32) under init_empty_weights
        from accelerate import init_empty_weights
        import transformers
        with init_empty_weights():
            model = transformers.AutoModel.from_config(hf_config(name), dtype=torch.float32)
        total, (largest, names) = calculate_maximum_sizes(model)
        out.append(record("accelerate.utils.calculate_maximum_sizes",
                          {"model": f"{name} (AutoModel, init_empty_weights)"},
                          {"total_size": total, "largest_layer": largest, "largest_layer_names": names},
                          model=name))
        original = estimate.create_empty_model
        estimate.create_empty_model = lambda *a, **k: model
        try:
            args = SimpleNamespace(model_name=name, library_name="transformers", trust_remote_code=False,
                                   dtypes=["float32", "float16", "int8", "int4"])
            rows = estimate.gather_data(args)
        finally:
            estimate.create_empty_model = original
        for dtype, layer, size, training in rows:
            usable = [v for v in training.values() if v != -1]
            out.append(record("accelerate.commands.estimate.gather_data",
                              {"model_name": name, "dtypes": [dtype]},
                              {"dtype": dtype, "largest_layer": layer, "total_size": size,
                               "training": training,
                               "training_using_adam": max(usable) if usable else None},
                              model=name))
        for precision in ("float32", "bfloat16"):
            kwargs = {"bytes": total, "mixed_precision": precision}
            out.append(record("accelerate.commands.estimate.estimate_training_usage",
                              kwargs, estimate.estimate_training_usage(**kwargs), model=name))
        del model
    return out


# ---- llm-analysis: parameter, state, activation and FLOP methods of LLMAnalysis ----

def llm_analysis_records() -> list[dict]:
    from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
    from llm_analysis.config import (DtypeConfig, ModelConfig, ParallelismConfig,
                                     get_gpu_config_by_name)
    out = []
    gpu = get_gpu_config_by_name("a100-sxm-80gb")
    for name in BIG + TINY:
        m = MODELS[name]
        config = dict(name=name, num_layers=m["layers"], n_head=m["heads"], hidden_dim=m["hidden"],
                      vocab_size=m["vocab"], max_seq_len=m["seq"], num_key_value_heads=m["kv_heads"],
                      ffn_embed_dim=m["ffn"], expansion_ratio=m["ffn"] / m["hidden"])
        for tp, dp in ((1, 1), (1, 8), (1, 64)):
            parallel = dict(tp_size=tp, pp_size=1, dp_size=dp)
            analysis = LLMAnalysis(ModelConfig(**config), gpu, DtypeConfig(),
                                   ParallelismConfig(**parallel))
            context = dict(model=name, model_config=config, parallelism=parallel,
                           dtype="w16a16e16")
            if (tp, dp) == (1, 1):
                for method in ("get_num_params_total", "get_num_params_per_layer_attn",
                               "get_num_params_per_layer_mlp", "get_num_params_per_layer_layernorm",
                               "get_num_params_embedding", "get_num_params_last_layernorm",
                               "get_weight_memory_per_layer", "get_memory_embedding"):
                    out.append(record(f"LLMAnalysis.{method}", {},
                                      getattr(analysis, method)(), **context))
                for b, s in ((1, m["seq"]), (4, m["seq"] // 4)):
                    kwargs = {"batch_size": b, "seq_len": s}
                    for method in ("get_num_flops_fwd_total", "get_num_flops_bwd_total",
                                   "get_activation_memory_output_embedding"):
                        out.append(record(f"LLMAnalysis.{method}", kwargs,
                                          getattr(analysis, method)(**kwargs), **context))
                    for recompute in ActivationRecomputation:
                        # derive has no materialised-attention Llama table: Llama is run with flash only
                        for flash in (True, False) if m["family"] == "gpt" else (True,):
                            kwargs = {"batch_size": b, "seq_len": s, "is_inference": False,
                                      "activation_recomputation": recompute.name, "flash_attn": flash}
                            total, attn, mlp, norms = analysis.get_activation_memory_per_layer(
                                b, s, False, recompute, flash_attn=flash, return_breakdown=True)
                            out.append(record("LLMAnalysis.get_activation_memory_per_layer",
                                              dict(kwargs, return_breakdown=True),
                                              {"total": total, "attn": attn, "mlp": mlp, "layernorm": norms},
                                              **context))
            for stage in (DSZeRO.NONE, DSZeRO.STAGE_1, DSZeRO.STAGE_2, DSZeRO.STAGE_3):
                kwargs = {"ds_zero": stage.name}
                optimizer, grads = analysis.get_memory_optimizer_state_and_gradient_per_layer(ds_zero=stage)
                out.append(record("LLMAnalysis.get_memory_optimizer_state_and_gradient_per_layer",
                                  kwargs, {"optimizer_state": optimizer, "gradient": grads}, **context))
                optimizer, grads = analysis.get_memory_optimizer_state_and_gradient_embedding(ds_zero=stage)
                out.append(record("LLMAnalysis.get_memory_optimizer_state_and_gradient_embedding",
                                  kwargs, {"optimizer_state": optimizer, "gradient": grads}, **context))
                out.append(record("LLMAnalysis.get_weight_memory_per_layer", kwargs,
                                  analysis.get_weight_memory_per_layer(ds_zero=stage), **context))
    return out


# ---- torchtitan: get_nparams_and_flops of the llama3 flavors and dict-config models ----

def torchtitan_records() -> list[dict]:
    from torchtitan.models.llama3 import llama3_configs
    out = []
    for flavor in ("debugmodel", "8B", "70B", "405B"):
        config = llama3_configs[flavor](attn_backend="flex")
        with torch.device("meta"):
            model = config.build()
        block = model.layers["0"]
        shape = {"dim": config.dim, "vocab_size": config.vocab_size, "n_layers": len(config.layers),
                 "n_heads": block.attention.n_heads, "n_kv_heads": block.attention.n_kv_heads,
                 "hidden_dim": block.feed_forward.w1.weight.shape[0],
                 "enable_weight_tying": config.enable_weight_tying}
        for seq in (2048, 8192, 131072):
            nparams, flops = config.get_nparams_and_flops(model, seq)
            out.append(record("torchtitan.models.llama3.llama3_configs[flavor]"
                              "(attn_backend='flex').get_nparams_and_flops(model, seq_len)",
                              {"flavor": flavor, "seq_len": seq},
                              {"nparams": nparams, "num_flops_per_token": flops}, shape=shape))
        del model
    return out


# ---- calflops and torch's FlopCounterMode on small models (they run the forward) ----

def calflops_records() -> list[dict]:
    from calflops import calculate_flops
    from torch.utils.flop_counter import FlopCounterMode
    out = []
    torch.manual_seed(0)
    for name in TINY:
        m = MODELS[name]
        for attn in ("eager", "sdpa"):
            model = hf_model(name, device="cpu", attn=attn)
            for b in (1, 2):
                ids = torch.randint(0, m["vocab"], (b, m["seq"]))
                with contextlib.redirect_stdout(io.StringIO()):
                    flops, macs, params = calculate_flops(
                        model=model, kwargs={"input_ids": ids}, include_backPropagation=True,
                        compute_bp_factor=2.0, print_results=False, print_detailed=False,
                        output_as_string=False)
                out.append(record("calflops.calculate_flops",
                                  {"model": f"{name} (AutoModelForCausalLM, attn_implementation="
                                   f"{attn!r})", "input_ids": [b, m["seq"]],
                                   "include_backPropagation": True, "compute_bp_factor": 2.0},
                                  {"flops": flops, "macs": macs, "params": params},
                                  model=name, attn=attn, batch=b))
                model.train()
                counter = FlopCounterMode(display=False)
                with counter:
                    loss = model(input_ids=ids, labels=ids).loss
                    loss.backward()
                model.zero_grad(set_to_none=True)
                out.append(record("torch.utils.flop_counter.FlopCounterMode",
                                  {"model": f"{name} (AutoModelForCausalLM, attn_implementation="
                                   f"{attn!r})", "input_ids": [b, m["seq"]],
                                   "run": "forward with labels + backward"},
                                  {"total": counter.get_total_flops(),
                                   "by_op": {str(k): v for k, v in sorted(
                                       ((str(op), n) for op, n in
                                        counter.get_flop_counts()["Global"].items()))}},
                                  model=name, attn=attn, batch=b))
    return out


PEERS = {
    "deepspeed": (deepspeed_records, ("deepspeed", "torch", "transformers")),
    "accelerate": (accelerate_records, ("accelerate", "torch", "transformers")),
    "llm_analysis": (llm_analysis_records, ("llm-analysis",)),
    "torchtitan": (torchtitan_records, ("torchtitan", "torch")),
    "calflops": (calflops_records, ("calflops", "torch", "transformers")),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/reference")
    parser.add_argument("--peer", action="append", choices=sorted(PEERS))
    args = parser.parse_args()
    for peer in args.peer or sorted(PEERS):
        produce, packages = PEERS[peer]
        records = produce()
        for index, entry in enumerate(records):
            entry["id"] = f"{peer}-{index:04d}"
        data = {
            "peer": peer,
            "versions": {package: importlib.metadata.version(package) for package in packages},
            "python": platform.python_version(),
            "generated_by": "tools/peers/generate.py (tools/peers/README.md)",
            "models": {name: MODELS[name] for name in sorted({r.get("model") for r in records} - {None})},
            "records": records,
        }
        path = Path(args.out) / f"peers_{peer}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(data, indent=1, sort_keys=True, default=str) + "\n"
        path.with_suffix(".tmp").write_text(text)
        path.with_suffix(".tmp").replace(path)
        print(f"{path}: {len(records)} records")


if __name__ == "__main__":
    main()
