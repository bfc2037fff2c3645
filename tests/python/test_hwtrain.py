"""The Python package `hwtrain` (python/): doctor, OptimizationConfig, plan, train, train_model,
errors and Ctrl-C, on CPU with a model small enough that the whole file runs in well under a
minute on 2 cores. Run by ctest (tests/python/CMakeLists.txt) with PYTHONPATH=<build>/python."""

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import hwtrain

# One transformer block, 32 wide: a step takes milliseconds on CPU.
TINY = {
    "model": {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 32},
    "train": {"max_steps": 8, "eval_interval": 4, "eval_batches": 2, "log_interval": 1, "sample_tokens": 0,
              "micro_batch_size": 4, "warmup_steps": 2},
    "optimization": {"num_workers": 1},
    "log": {"report": False, "gpu_log_interval": 0.0, "progress": "lines"},
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A small text corpus (about 40 KB, cut into documents of 256 bytes) and its own data cache."""
    root = tmp_path_factory.mktemp("corpus")
    words = "the quick brown fox jumps over the lazy dog while hardware aware training plans".split()
    lines = [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(700)]
    text = root / "corpus.txt"
    text.write_text("\n".join(lines) + "\n")
    return {"text": str(text), "data": {"path": str(text), "cache_dir": str(root / "cache"),
                                        "max_document_bytes": 256, "val_fraction": 0.2}}


def tiny_config(corpus, **sections):
    config = json.loads(json.dumps(TINY))
    config["data"] = dict(corpus["data"])
    for name, values in sections.items():
        config.setdefault(name, {}).update(values)
    return config


def cpu_model_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return None


def test_doctor_describes_this_cpu():
    text = hwtrain.doctor()
    assert isinstance(text, str) and text.strip()
    name = cpu_model_name()
    if name:
        assert name.split()[0] in text, text
    report = hwtrain.doctor(as_dict=True)
    assert set(report) == {"hardware", "findings"}
    assert report["hardware"]["cpu"]["num_physical_cores"] >= 1 and report["hardware"]["cpu"]["model_name"] in text
    for finding in report["findings"]:
        assert {"id", "severity", "message", "fix"} <= set(finding)


def test_optimization_config_summaries_and_plan(corpus):
    cfg = hwtrain.OptimizationConfig(tiny_config(corpus), mixed_precision_dtype="fp32", num_workers=1)
    assert cfg.mixed_precision_dtype == "fp32" and cfg.num_workers == 1
    assert cfg.to_dict()["model"]["n_embd"] == 32
    assert "OptimizationConfig(" in repr(cfg)
    summary = cfg.get_hardware_summary()
    assert isinstance(summary, str) and summary.strip()
    assert cfg.get_optimization_summary().strip()
    assert cfg.get_optimization_metrics()["active"]["precision"] == "fp32"
    assert cfg.plan()["precision"] == "fp32"


def test_plan_returns_plan_json(corpus, tmp_path):
    plan = hwtrain.plan(tiny_config(corpus))
    for key in ("device", "precision", "attention", "micro_batch_size", "grad_accum_steps", "global_batch_size",
                "intra_op_threads", "num_workers", "decisions", "warnings"):
        assert key in plan, key
    assert plan["micro_batch_size"] == 4
    toml = tmp_path / "run.toml"
    toml.write_text('[model]\nn_layer = 1\nn_head = 2\nn_embd = 32\nblock_size = 32\n[train]\nmicro_batch_size = 2\n')
    assert hwtrain.plan(toml)["micro_batch_size"] == 2  # a TOML file, as --config reads it
    paper = hwtrain.plan({"model.preset": "gpt2"}, preset="h100-80gb", gpus_per_node=8)
    assert paper["device"].startswith("cuda") and paper["world_size"] == 8


def test_bad_key_or_value_raises_value_error_naming_it():
    with pytest.raises(ValueError, match=r"unknown key 'model\.n_layr'.*model\.n_layer"):
        hwtrain.plan({"model": {"n_layr": 2}})
    with pytest.raises(hwtrain.ConfigError, match="optimization.bogus"):
        hwtrain.OptimizationConfig(bogus=1)
    with pytest.raises(ValueError, match="optimization.mixed_precision_dtype"):
        hwtrain.OptimizationConfig(mixed_precision_dtype="fp64")
    with pytest.raises(ValueError, match="train.max_steps"):
        hwtrain.config({"train.max_steps": "ten"})
    with pytest.raises(ValueError, match="train.lr"):
        hwtrain.config({"train": {"lr": [1, 2]}})
    assert issubclass(hwtrain.ConfigError, hwtrain.Error) and issubclass(hwtrain.Error, RuntimeError)


def test_train_tiny_run(corpus, tmp_path):
    handler = signal.getsignal(signal.SIGINT)
    out = tmp_path / "run"
    result = hwtrain.train(tiny_config(corpus), out=out)
    assert signal.getsignal(signal.SIGINT) is handler  # Python's handler is back
    assert result["run_dir"] == str(out)
    assert result["steps"] == 8 and result["interrupted"] is None
    history = result["history"]
    assert [h["step"] for h in history] == list(range(1, 9))
    assert all(math.isfinite(h["loss"]) for h in history)
    assert result["final_loss"] == history[-1]["loss"]
    assert math.isfinite(result["final_val_loss"]) and len(result["evals"]) >= 2
    assert os.path.isfile(out / "metrics.jsonl") and result["metrics_file"] == str(out / "metrics.jsonl")
    assert os.path.isdir(result["checkpoint"]) and result["checkpoint"].startswith(str(out))
    assert result["plan"]["micro_batch_size"] == 4 and result["config"]["model"]["n_layer"] == 1
    metrics = hwtrain.read_metrics(out)
    assert [s["step"] for s in metrics["steps"]] == list(range(1, 9))

    # Resuming continues the run: the model comes from the checkpoint, steps 9..10 are new.
    resumed = hwtrain.train(tiny_config(corpus, train={"max_steps": 10}), out=out, resume=result["checkpoint"])
    assert resumed["steps"] == 10 and [h["step"] for h in resumed["history"]] == [9, 10]
    with pytest.raises(ValueError, match="holds a run"):
        hwtrain.train(tiny_config(corpus), out=out)  # refused, as by `hwtrain train --out`


def test_train_releases_the_gil(corpus, tmp_path):
    done, results, ticks = threading.Event(), [], 0

    def run():
        try:
            results.append(hwtrain.train(tiny_config(corpus), out=tmp_path / "run"))
        finally:
            done.set()

    worker = threading.Thread(target=run)
    worker.start()
    while not done.is_set():  # Python keeps running while the run trains (a second or more)
        ticks += 1
        time.sleep(0.002)
    worker.join()
    assert results and results[0]["steps"] == 8
    assert ticks >= 20, ticks  # with the GIL held, only the few milliseconds of Python around the run


def test_train_model_maps_its_arguments(corpus, tmp_path):
    second = tmp_path / "more.txt"
    second.write_text(open(corpus["text"]).read()[:8000])
    result = hwtrain.train_model(
        {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 32}, tokenizer="byte",
        sources=[corpus["text"], str(second)], epochs=0.05, batch_size=8, use_amp=False, num_workers=1,
        pin_memory=False, log_gpu_memory=True, out=tmp_path / "run",
        train={"eval_interval": 0, "sample_tokens": 0}, log={"report": False, "progress": "lines"},
        data={"cache_dir": corpus["data"]["cache_dir"], "max_document_bytes": 256, "val_fraction": 0.2})
    config = result["config"]
    assert config["data"]["sampling"] == "sequential" and config["data"]["path"].endswith(".hwt")
    assert config["optimization"]["target_batch_size"] == 8
    assert config["optimization"]["mixed_precision_dtype"] == "fp32"
    assert config["log"]["gpu_log_interval"] == 1 and config["optimization"]["num_workers"] == 1
    assert result["plan"]["global_batch_size"] == 8
    assert result["steps"] == config["train"]["max_steps"] == len(result["history"]) >= 1
    assert all(math.isfinite(h["loss"]) for h in result["history"])
    with pytest.raises(ValueError, match="epochs"):
        hwtrain.train_model("char-small", epochs=0)


CHILD = textwrap.dedent("""
    import signal, sys, hwtrain
    config = {config}
    try:
        hwtrain.train(config, out=sys.argv[1])
    except KeyboardInterrupt as e:
        restored = signal.getsignal(signal.SIGINT) is signal.default_int_handler
        print("INTERRUPTED", e.result["steps"], e.result["checkpoint"], restored, flush=True)
        raise
    print("FINISHED", flush=True)
""")


def test_ctrl_c_stops_at_the_end_of_the_step_with_a_checkpoint(corpus, tmp_path):
    config = tiny_config(corpus, train={"max_steps": 100000, "eval_interval": 0, "time_budget": 60})
    out = tmp_path / "run"
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(config=repr(config)), str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in child.stderr:  # progress lines ("step <n> | loss ...") once training runs
            if line.startswith("step "):
                break
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode in (-signal.SIGINT, 130), (child.returncode, stdout, stderr)
    assert "KeyboardInterrupt" in stderr and "interrupted" in stderr
    word, steps, checkpoint, restored = stdout.split()
    assert word == "INTERRUPTED" and 0 < int(steps) < 100000 and restored == "True"
    assert os.path.isdir(checkpoint) and checkpoint.startswith(str(out / "checkpoints"))
    assert os.path.isfile(out / "metrics.jsonl")
