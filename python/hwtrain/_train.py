"""train() and train_model(): `hwtrain train` in this process, its metrics as Python objects.

train() runs the same job as the command (config, run directory, data preparation, plan, trainer,
metrics.jsonl and the other sinks, checkpoints, the final sample), with the GIL released, logging
to stderr. Ctrl-C stops the run at the end of the current step, after which the final evaluation
and checkpoint are written as by the binary; then KeyboardInterrupt is raised, carrying the
result as its `result` attribute (a program that installed its own SIGINT handler gets the signal
delivered to that handler instead, and train() returns the result if the handler does not raise).
A second Ctrl-C ends the process at once. SIGTERM likewise stops at the end of the step and is
then delivered again to Python's handler (by default: the process ends, checkpoint written).

train_model() is train() with the names of a high-level training API mapped onto config keys.
"""

import hashlib
import json
import math
import os
import signal
import sys
from collections.abc import Mapping

from . import _hwtrain
from ._config import config_parts, resolved_config


def _interrupt(result):
    """After a run stopped by a signal: KeyboardInterrupt, or the signal to the program's handler."""
    sig = result["interrupted"]
    if sig == "SIGINT":
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            where = f"; checkpoint {result['checkpoint']}" if result["checkpoint"] else ""
            exc = KeyboardInterrupt(f"hwtrain: training stopped by Ctrl-C after step {result['steps']}{where}")
            exc.result = result
            raise exc
        signal.raise_signal(signal.SIGINT)
    elif sig == "SIGTERM":
        signal.raise_signal(signal.SIGTERM)


def train(config=None, out=None, resume=None, *, init_from=None, overwrite=False):
    """Trains as `hwtrain train` does; returns what the run did.

    config:    None, a TOML path, a mapping of config keys (dotted or nested) or an
               OptimizationConfig (see hwtrain._config).
    out:       the run directory (default: runs/<date-time> under the current directory, linked
               as runs/latest); one that already holds a run is refused unless `resume` continues
               it or overwrite=True replaces it.
    resume:    a checkpoint directory, a run directory or "latest".
    init_from: a Hugging Face model directory whose shape and weights start the run.

    Returns a dict:
      run_dir, steps (optimizer steps completed, resumed ones included), final_loss,
      final_val_loss (None without an evaluation), history (one dict per step this call ran,
      the fields of metrics.jsonl's step records: step, loss, lr, grad_norm, tokens_per_second,
      step_seconds, ...; unknown values None), evals (val_loss, val_perplexity per evaluation),
      checkpoint (the last one written, or None), interrupted (None, "SIGINT" or "SIGTERM"),
      tokens_seen, elapsed_seconds, metrics_file (metrics.jsonl, the whole run's), plan
      (plan.json) and config (the resolved config), both dicts.
    Raises ValueError (hwtrain.ConfigError, hwtrain.DataError) or RuntimeError (hwtrain.Error)
    with hwtrain's one-line message; KeyboardInterrupt after Ctrl-C (see the module doc).
    """
    file, items = config_parts(config)
    return _run(file, items, out, resume, init_from, overwrite)


def _run(file, items, out=None, resume=None, init_from=None, overwrite=False):
    raw = json.loads(_hwtrain.train(file, list(items.items()), "hwtrain.train(config)", os.fspath(out or ""),
                                    os.fspath(resume or ""), os.fspath(init_from or ""), bool(overwrite)))
    history, evals = raw["history"], raw["evals"]
    metrics_file = os.path.join(raw["run_dir"], "metrics.jsonl") if raw["run_dir"] else None
    result = {
        "run_dir": raw["run_dir"],
        "steps": raw["steps"],
        "final_loss": history[-1]["loss"] if history else None,
        "final_val_loss": evals[-1]["val_loss"] if evals else None,
        "history": history,
        "evals": evals,
        "checkpoint": raw["checkpoint"],
        "interrupted": raw["interrupted"],
        "tokens_seen": history[-1].get("tokens_seen") if history else None,
        "elapsed_seconds": raw["elapsed_seconds"],
        "metrics_file": metrics_file if metrics_file and os.path.exists(metrics_file) else None,
        "plan": json.loads(raw["plan_json"]) if "plan_json" in raw else None,
        "config": json.loads(raw["config_json"]) if "config_json" in raw else None,
    }
    if result["interrupted"]:
        _interrupt(result)
    return result


def _cache_dir(resolved):
    """hwtrain's data cache: data.cache_dir, else $XDG_CACHE_HOME/hwtrain/data, else ~/.cache/..."""
    if resolved["data"]["cache_dir"]:
        return os.path.expanduser(resolved["data"]["cache_dir"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hwtrain", "data")


def _prepared_sources(sources, file, items):
    """Several text files or directories as one token file, prepared once into the data cache
    (named by the sources' paths, sizes and times and the data.* options)."""
    resolved = resolved_config(file or None, items, "hwtrain.train_model", validate=False)
    key = hashlib.sha256(json.dumps(resolved["data"], sort_keys=True).encode())
    for source in sources:
        for root, _dirs, names in os.walk(source) if os.path.isdir(source) else [("", [], [source])]:
            for name in sorted(names):
                path = os.path.abspath(os.path.join(root, name))
                st = os.stat(path)
                key.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    cache = _cache_dir(resolved)
    output = os.path.join(cache, f"sources-{key.hexdigest()[:16]}.hwt")
    if not os.path.exists(output):
        os.makedirs(cache, exist_ok=True)
        partial = f"{output}.partial-{os.getpid()}.hwt"
        _hwtrain.prepare(list(sources), partial, file, list(items.items()), "hwtrain.train_model")
        os.replace(partial, output)
    return output


def _steps_for_epochs(epochs, file, items):
    """train.max_steps for `epochs` sequential passes over the training windows of the data."""
    info = json.loads(_hwtrain.dataset_info(file, list(items.items()), "hwtrain.train_model"))
    resolved = resolved_config(file or None, items, "hwtrain.train_model")
    block = resolved["model"]["block_size"]
    tokens = info["train_tokens"]
    phases = min(block, tokens - block)  # as data/dataset_sampler.cpp counts sequential windows
    windows = max(1, (tokens - phases) // block)
    batch = resolved["optimization"]["target_batch_size"]
    if batch <= 0:
        batch = json.loads(_hwtrain.plan(file, list(items.items()), "hwtrain.train_model"))["global_batch_size"]
    steps = max(1, math.ceil(epochs * windows / batch))
    print(f"hwtrain.train_model: {epochs} epoch(s) of {windows} windows of {block} tokens "
          f"= {steps} steps of {batch} sequences", file=sys.stderr)
    return steps


def train_model(preset_or_model_config=None, tokenizer=None, sources=None, epochs=None, batch_size=None,
                use_amp=None, num_workers=None, pin_memory=None, log_gpu_memory=None, *, config=None, out=None,
                resume=None, **overrides):
    """Trains one of the built-in model families; train() with these names mapped onto config keys:

      preset_or_model_config  a preset name -> model.preset ("char-small", "gpt2", "llama-tiny", ...),
                              or a mapping of [model] keys -> model.<key> (architecture="llama", ...)
      tokenizer               -> data.tokenizer ("byte", a SentencePiece .model, a tokenizer directory)
      sources                 text files or directories -> data.path (several are prepared into one
                              token file in the data cache first); None: the default corpus
      epochs                  -> data.sampling = "sequential" and train.max_steps = ceil(epochs x
                              training windows / global batch); None: train.max_steps as configured
      batch_size              -> optimization.target_batch_size (sequences per optimizer step; the
                              planner splits it into micro-batches and accumulation to fit memory)
      use_amp                 True -> optimization.mixed_precision_dtype = "auto" (the planner's
                              choice of bf16/fp16 where the hardware runs it faster), False -> "fp32"
      num_workers, pin_memory -> optimization.num_workers, optimization.pin_memory
      log_gpu_memory          True -> log.gpu_log_interval = 1 (hardware monitor samples every second;
                              device memory is in every step's record either way)
    None leaves a key to the config and the planner (the names and mappings are those of the C++
    hwt::train_model, run/train_model.h). `config` is a base config (see train());
    `overrides` are config keys, dotted via **{"train.lr": 1e-3} or as tables, train={"lr": 1e-3},
    and win over everything above. Returns train()'s dict.
    """
    if epochs is not None and not epochs > 0:
        raise _hwtrain.ConfigError(f"train_model: epochs = {epochs} is out of range; valid: > 0")
    if batch_size is not None and batch_size < 1:
        raise _hwtrain.ConfigError(f"train_model: batch_size = {batch_size} is out of range; valid: >= 1")
    mapped = {}
    if isinstance(preset_or_model_config, Mapping):
        mapped.update({(k if "." in k else "model." + k): v for k, v in preset_or_model_config.items()})
    elif preset_or_model_config is not None:
        mapped["model.preset"] = preset_or_model_config
    if tokenizer is not None:
        mapped["data.tokenizer"] = os.fspath(tokenizer)
    if batch_size is not None:
        mapped["optimization.target_batch_size"] = batch_size
    if use_amp is not None:
        mapped["optimization.mixed_precision_dtype"] = "auto" if use_amp else "fp32"
    if num_workers is not None:
        mapped["optimization.num_workers"] = num_workers
    if pin_memory is not None:
        mapped["optimization.pin_memory"] = pin_memory
    if log_gpu_memory:
        mapped["log.gpu_log_interval"] = 1.0
    file, items = config_parts(config, mapped)
    _, explicit = config_parts(None, overrides)
    items.update(explicit)
    if sources is not None:
        sources = [os.fspath(s) for s in ([sources] if isinstance(sources, (str, os.PathLike)) else sources)]
        if "data.path" not in explicit:
            items["data.path"] = sources[0] if len(sources) == 1 else _prepared_sources(sources, file, items)
    if epochs is not None:
        items.setdefault("data.sampling", "sequential")
        if "train.max_steps" not in explicit:
            items["train.max_steps"] = _steps_for_epochs(epochs, file, items)
    return _run(file, items, out, resume)
