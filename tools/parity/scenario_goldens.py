"""What the model-level golden writers share (llama_mask.py, qwen2vl.py, hybrid.py,
fla_layer.py): one driver run per release, then a golden of a header, the scenarios' batch files
(`model_batches`) and the recorded scenarios."""

import json


def write_batches(scenarios, batch_for, batches_dir, dumps):
    """The batch file of every scenario (its "batch" key), as batch_for(name, spec) describes it."""
    for name, spec in scenarios.items():
        (batches_dir / spec["batch"]).write_text(dumps(batch_for(name, spec)) + "\n")


def write(name, releases, only, record, header, model_batches, golden_dir, dumps):
    """For each release (only those of `only`, when given): `record(release)` runs the driver and
    returns its JSON; the golden `<name>-<release>.json` holds `header(release, environment)`,
    then `model_batches` and the driver's scenarios."""
    for release in releases:
        if only is not None and release not in only:
            continue
        data = record(release)
        golden = header(release, data["environment"])
        golden["model_batches"] = model_batches
        golden["scenarios"] = data["scenarios"]
        (golden_dir / f"{name}-{release}.json").write_text(dumps(golden) + "\n")
        print(f"wrote {name}-{release}.json")


def recorder(run_python, driver, cache, cache_name, paths_for, python_for):
    """`record` for write(): the driver run under python_for(release) with paths_for(release)."""
    def record(release):
        out = cache / f"{cache_name}-{release}.json"
        run_python(driver, ["--out", str(out)], paths_for(release), python=python_for(release))
        return json.loads(out.read_text())
    return record


def transformers_header(fmt, entry_point, **extra):
    """`header` for write() of a transformers model run with the stand-in flash_attn; `extra`
    fields follow the entry point."""
    def header(release, env):
        return {"format": fmt, "library": "transformers", "release": release, "torch": env["torch"],
                "torch_device": "cpu", "python": env["python"], "loaded": "whole", "entry_point": entry_point,
                **{k: (v(release, env) if callable(v) else v) for k, v in extra.items()},
                "stubs": [], "patches": env["patches"], "flash_attn_standin": env["flash_attn_standin"]}
    return header
