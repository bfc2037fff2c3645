"""Configs as the Python API takes them, and OptimizationConfig.

A config is any of:
  - None: hwtrain's defaults (the default model on the default corpus);
  - a path (str or os.PathLike) to a TOML file, as `hwtrain train --config FILE` reads it;
  - a mapping of dotted keys and/or nested tables, mixed freely:
        {"model": {"n_layer": 2, "n_embd": 64}, "train.max_steps": 100}
  - an OptimizationConfig (its file and keys).
Every form becomes (file, [(key, value), ...]) and is read by hwtrain's own RunConfig, so keys,
types and values are checked exactly as in a TOML file: a bad key or value raises ValueError
(hwtrain.ConfigError) with hwtrain's one-line message naming the key. `hwtrain train --help-config`
lists every key with its description and default.
"""

import json
import os
from collections.abc import Mapping

from . import _hwtrain


def _flatten(mapping, prefix, out):
    for key, value in mapping.items():
        key = prefix + str(key)
        if isinstance(value, Mapping):
            _flatten(value, key + ".", out)
        else:
            out.pop(key, None)  # a key given again moves to the end: the later value wins
            out[key] = os.fspath(value) if isinstance(value, os.PathLike) else value


def config_parts(config=None, overrides=None):
    """(toml_file, items) of a config (see the module doc) with `overrides` (a mapping) on top."""
    file, items = "", {}
    if isinstance(config, OptimizationConfig):
        file, items = config._file, dict(config._items)
    elif isinstance(config, (str, os.PathLike)):
        file = os.fspath(config)
    elif isinstance(config, Mapping):
        _flatten(config, "", items)
    elif config is not None:
        raise TypeError("config must be None, a TOML file path, a mapping of config keys or an "
                        f"OptimizationConfig, not {type(config).__name__}")
    if overrides:
        _flatten(overrides, "", items)
    return file, items


def resolved_config(config=None, overrides=None, source="config", validate=True):
    """The resolved config as a nested dict (defaults, then the file, then the keys)."""
    file, items = config_parts(config, overrides)
    return json.loads(_hwtrain.resolved_config(file, list(items.items()), source, validate))


class OptimizationConfig:
    """The [optimization] section of a run, with hwtrain's HardwareAwareOptimizer behind it.

    Keyword arguments are the [optimization] keys (mixed_precision_dtype, checkpoint_every,
    num_workers, pin_memory, target_batch_size, ...); any other config key may be given dotted,
    OptimizationConfig(num_workers=2, **{"model.n_layer": 4}), and `config` is a base config (a
    TOML path or a mapping). The keys are checked at once: a bad key or value raises ValueError.
    Attributes read the resolved [optimization] values (cfg.mixed_precision_dtype -> "auto").

    get_hardware_summary() and the other get_* methods detect this machine and plan the run the
    first time one is called (a fraction of a second: a short GEMM benchmark), as `hwtrain train`
    would plan it; the config can be passed to plan() and train() as is.
    """

    def __init__(self, config=None, **options):
        base_file, base_items = config_parts(config)
        keys = {(k if "." in k else "optimization." + k): v for k, v in options.items()}
        _, items = config_parts(None, {**base_items, **keys})
        self._file, self._items = base_file, items
        self._resolved = resolved_config(self, source="OptimizationConfig")
        self._optimizer = None

    def __getattr__(self, name):
        section = self.__dict__.get("_resolved", {}).get("optimization", {})
        if name in section:
            return section[name]
        raise AttributeError(f"OptimizationConfig has no attribute or [optimization] key '{name}'")

    def __repr__(self):
        args = [repr(self._file)] if self._file else []
        for key, value in self._items.items():
            name = key[len("optimization."):] if key.startswith("optimization.") else None
            args.append(f"{name}={value!r}" if name else f"**{{{key!r}: {value!r}}}")
        return "OptimizationConfig(" + ", ".join(args) + ")"

    def to_dict(self):
        """The whole resolved config, one nested dict per section."""
        return json.loads(json.dumps(self._resolved))

    def items(self):
        """The keys set explicitly, dotted, in the order given (the base config's first)."""
        return dict(self._items)

    def _planned(self):
        if self._optimizer is None:
            self._optimizer = _hwtrain.Optimizer(self._file, list(self._items.items()), "OptimizationConfig")
        return self._optimizer

    def get_hardware_summary(self):
        """What this machine offers: CPU and ISA, cores, memory and limits, BLAS, GPUs (text)."""
        return self._planned().hardware_summary()

    def get_optimization_summary(self):
        """The plan for this config on this machine, each decision with its reason (text)."""
        return self._planned().optimization_summary()

    def get_optimization_metrics(self):
        """The active optimizations (device, precision, attention, batch geometry...) as a dict."""
        return json.loads(self._planned().optimization_metrics())

    def get_hardware(self):
        """The detected hardware profile as a dict (what `hwtrain doctor --json` prints)."""
        return json.loads(self._planned().hardware())

    def plan(self):
        """plan.json of this config on this machine, as a dict."""
        return json.loads(self._planned().plan())
