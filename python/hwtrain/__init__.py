"""hwtrain: hardware-aware GPT training (C++17 on LibTorch), from Python.

The same engine as the `hwtrain` command, in this process:

    import hwtrain
    print(hwtrain.doctor())                      # this machine and what slows training on it
    cfg = hwtrain.OptimizationConfig(mixed_precision_dtype="auto", **{"model.n_layer": 4})
    print(cfg.get_hardware_summary())
    print(cfg.get_optimization_summary())        # the plan, each decision with its reason
    plan = hwtrain.plan({"model": {"preset": "char-small"}})                # plan.json as a dict
    result = hwtrain.train({"model.preset": "char-small", "train.max_steps": 200}, out="runs/a")
    print(result["final_loss"], len(result["history"]), result["checkpoint"])
    hwtrain.train_model("char-small", sources=["my.txt"], epochs=1, batch_size=16)

Configs are None, a TOML path, a mapping of config keys (dotted or nested tables) or an
OptimizationConfig; keys are those of `hwtrain train --help-config`. Errors are hwtrain.Error
(a RuntimeError) with hwtrain's one-line message; hwtrain.ConfigError and hwtrain.DataError are
ValueErrors too. The module does not need `import torch` first (it links LibTorch itself), and
works after it. python/README.md has the details.
"""

import json
import os

from . import _hwtrain
from ._config import OptimizationConfig, config_parts, resolved_config
from ._train import train, train_model

Error = _hwtrain.Error
ConfigError = _hwtrain.ConfigError
DataError = _hwtrain.DataError
IoError = _hwtrain.IoError
HardwareError = _hwtrain.HardwareError
OutOfMemoryError = _hwtrain.OutOfMemoryError
for _error in (Error, ConfigError, DataError, IoError, HardwareError, OutOfMemoryError):
    _error.__module__ = __name__  # tracebacks say hwtrain.ConfigError
del _error

__version__ = _hwtrain.__version__
torch_version = _hwtrain.torch_version  # the LibTorch the module was built against

__all__ = [
    "doctor", "OptimizationConfig", "plan", "train", "train_model", "prepare", "read_metrics", "config",
    "Error", "ConfigError", "DataError", "IoError", "HardwareError", "OutOfMemoryError",
]


def doctor(as_dict=False):
    """`hwtrain doctor`: the hardware summary and the findings that slow training, each with its fix.

    Returns the text the command prints, or with as_dict=True {"hardware": the profile (as
    `hwtrain doctor --json`), "findings": [{"id", "severity", "message", "fix"}, ...]}.
    """
    text = _hwtrain.doctor(bool(as_dict))
    return json.loads(text) if as_dict else text


def plan(config=None, *, preset=None, gpus_per_node=1, nodes=1):
    """`hwtrain plan --json`: plan.json for `config` on this machine, as a dict.

    preset names an accelerator to plan for instead (hwtrain's hardware presets, e.g.
    "h100-80gb"), with gpus_per_node and nodes.
    """
    file, items = config_parts(config)
    return json.loads(_hwtrain.plan(file, list(items.items()), "hwtrain.plan(config)", preset or "",
                                    int(gpus_per_node), int(nodes)))


def config(config=None, **overrides):
    """The resolved config (defaults, then the file, then the keys) as a nested dict, checked."""
    return resolved_config(config, overrides, source="hwtrain.config")


def prepare(sources, output, config=None, **data_options):
    """`hwtrain prepare`: text files or directories into a token file (output ending .hwt) or a
    dataset directory, with the data.* options of `config` and data_options (tokenizer="byte",
    val_fraction=0.05, document_separator="%", ...). Returns {"output", "files", "bytes",
    "documents", "description"}.
    """
    sources = [os.fspath(s) for s in ([sources] if isinstance(sources, (str, os.PathLike)) else sources)]
    file, items = config_parts(config, {"data": data_options})
    return json.loads(_hwtrain.prepare(sources, os.fspath(output), file, list(items.items()), "hwtrain.prepare"))


def read_metrics(path):
    """A run's metrics.jsonl (a run directory or the file) as {"steps": [...], "evals": [...],
    "monitor": [...], "bad_lines": n}; a resumed run's repeated steps appear once."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    return json.loads(_hwtrain.read_metrics(path))
