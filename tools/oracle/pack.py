"""Build the oracle's carry folder: the upstream code the device needs, never committed.

    python tools/oracle/pack.py [--out .oracle-carry] [--cache /work/oracle-cache] [--resume]

Run here (CPU, PyPI reachable) with the oracle's venv (tools/oracle/README.md). It writes:
- `transformers-<release>.tar.xz` for every transformers release a `batch` case names: a trimmed
  copy of the release's wheel, only the module files that importing and running its conversion
  loads (found by running the conversion on the parity batches and the oracle cases of that
  release, trace_release.py), verified here: the trimmed copy must give exactly the full wheel's
  results on the same batches, else the pack fails;
- `wheels/`: the FLA wheels (flash-linear-attention 0.1, the first published release after
  fla-org/flash-linear-attention#180, and fla-core 0.6.0);
- `flash_attn-<release>/ops/triton/rotary.py`, `layers/rotary.py` from the sdist of every
  flash-attn release a flash-attn rotary case names;
- `manifest.json`: what is in it, with sizes, the patches, and the flash-attn-4 check (the sizes
  of flash-attn-4 and its CuTe DSL wheels against the carry limit).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CARRY_LIMIT = 64 << 20
FLA_WHEELS = [("flash-linear-attention", "0.1"), ("fla-core", "0.6.0")]
FA4 = ["flash-attn-4", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-cu12"]
PLATFORM = ["--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:"] + sum(
    (["--platform", p] for p in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                                 "manylinux2014_x86_64", "manylinux_2_24_x86_64", "manylinux_2_34_x86_64")), [])


def pip(*args):
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, stdout=subprocess.DEVNULL)


def cases():
    for path in sorted(REPO.glob("repro_cases/*.json")) + sorted(REPO.glob("tests/oracle/cases/*.json")):
        yield path, json.loads(path.read_text())


def releases():
    wanted = {}
    for path, doc in cases():
        r = doc.get("environment", {}).get("transformers")
        if r and ".dev" not in r and "batch" in doc and "varlen" not in doc and "rotary" not in doc:
            wanted.setdefault(r, []).append(path)
    return wanted


def trace(release, stack_dir, batches, cache):
    env = dict(os.environ, ORACLE_STACK=str(stack_dir), ORACLE_WORK=str(cache / "work"), PYTHONHASHSEED="0",
               HF_HUB_OFFLINE="1", TRANSFORMERS_NO_ADVISORY_WARNINGS="1")
    proc = subprocess.run([sys.executable, str(HERE / "trace_release.py"), release] + [str(b) for b in batches],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"tracing transformers {release} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def pack_release(release, own_cases, cache, out):
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    if not list(wheels.glob(f"transformers-{release}-*.whl")):
        pip("download", "-q", "--no-deps", "-d", str(wheels), f"transformers=={release}")
    wheel = next(wheels.glob(f"transformers-{release}-*.whl"))
    full = cache / "full"
    target = full / f"transformers-{release}"
    if not (target / "transformers").is_dir():
        with zipfile.ZipFile(wheel) as z:
            z.extractall(target)
    batches = sorted((REPO / "tests" / "golden" / "batches").glob("*.json")) + own_cases
    whole = trace(release, full, batches, cache)
    trim = cache / "trim"
    trimmed = trim / f"transformers-{release}"
    shutil.rmtree(trimmed, ignore_errors=True)
    # the whole utils package besides: helpers a CUDA-only branch may import lazily (small)
    extra = [os.path.relpath(f, target) for f in (target / "transformers" / "utils").glob("*.py")]
    # releases >= 4.53 build their lazy import structure at import by reading every module of
    # transformers/models/ (utils/import_utils.py, create_import_structure_from_path): there the
    # models tree travels whole; older releases need its package __init__ files only
    scans = "create_import_structure_from_path" in (target / "transformers" / "utils" / "import_utils.py").read_text()
    # releases before 4.36 replay the per-model Llama class, whose package __init__ imports
    # tokenizer modules (t5's) wherever sentencepiece is installed (the device): whole tree too
    before_436 = tuple(int(x) for x in release.split(".")[:2]) < (4, 36)
    pattern = "*.py" if scans or before_436 else "__init__.py"
    # read, not imported: tools/parity/tracing.py passes attn_implementation when this file does
    if (target / "transformers" / "integrations" / "flash_attention.py").is_file():
        extra.append(os.path.join("transformers", "integrations", "flash_attention.py"))
    extra += [os.path.relpath(f, target) for f in (target / "transformers" / "models").rglob(pattern)]
    for rel in sorted(set(whole["files"]) | set(extra)):
        dest = trimmed / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(target / rel, dest)
    info = next(target.glob("transformers-*.dist-info"))
    (trimmed / info.name).mkdir(parents=True)
    shutil.copy2(info / "METADATA", trimmed / info.name / "METADATA")  # importlib.metadata.version("transformers")
    again = trace(release, trim, batches, cache)
    if again["results"] != whole["results"] or again["files"] != whole["files"]:
        diff = [k for k in whole["results"] if whole["results"][k] != again["results"].get(k)]
        raise SystemExit(f"transformers {release}: the trimmed copy differs from the wheel on {diff[:5]}")
    archive = out / f"transformers-{release}.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(trimmed, arcname=f"transformers-{release}")
    return {"release": release, "wheel_bytes": wheel.stat().st_size, "files": len(whole["files"]),
            "archive_bytes": archive.stat().st_size, "verified_batches": len(whole["results"])}


def pack_rotary(cache, out):
    versions = sorted({doc.get("environment", {}).get("flash_attn", "2.6.3") for _, doc in cases()
                       if doc.get("rotary", {}).get("implementation", "flash_attn") == "flash_attn" and "rotary" in doc})
    done = []
    sdist = cache / "sdist"
    sdist.mkdir(parents=True, exist_ok=True)
    for v in versions:
        tgz = sdist / f"flash_attn-{v}.tar.gz"
        if not tgz.exists():
            env = dict(os.environ, FLASH_ATTENTION_SKIP_CUDA_BUILD="TRUE")
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                            "--no-build-isolation", "-d", str(sdist), f"flash-attn=={v}"], check=True, env=env)
        dest = out / f"flash_attn-{v}"
        with tarfile.open(tgz) as tar:
            for rel in ("flash_attn/ops/triton/rotary.py", "flash_attn/layers/rotary.py"):
                member = next(m for m in tar.getmembers() if m.name.endswith(rel))
                target = dest / rel.replace("flash_attn/", "", 1)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
        done.append(v)
    return done


def check_fa4(cache):
    folder = cache / "fa4"
    folder.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for name in FA4:
        pip("download", "-q", "--no-deps", "--pre", "-d", str(folder), *PLATFORM, name)
    for f in sorted(folder.glob("*.whl")):
        sizes[f.name] = f.stat().st_size
    total = sum(sizes.values())
    return {"wheels": sizes, "total_bytes": total, "carry_limit_bytes": CARRY_LIMIT,
            "fits": total < CARRY_LIMIT and max(sizes.values()) < (16 << 20),
            "decision": ("carried" if total < CARRY_LIMIT else
                         "not carried: flash-attn-4 and its CuTe DSL wheels exceed the carry limit; FA4 cases are "
                         "recorded as not measured")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(REPO / ".oracle-carry"))
    ap.add_argument("--cache", default=os.environ.get("ORACLE_CACHE", "/work/oracle-cache"))
    ap.add_argument("--releases", default="", help="only these (comma-separated); default every release named")
    ap.add_argument("--resume", action="store_true",
                    help="keep the releases an earlier run packed and verified into the same --out")
    args = ap.parse_args()
    out, cache = Path(args.out), Path(args.cache)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"transformers": [], "patches": [
        "transformers.dependency_versions_check: a module whose checks do nothing (device's dependency versions)",
        "fla, fla.modules, fla.ops, fla.layers, fla.models: stub packages (their __init__ not run)",
        "flash-attn's rotary files loaded into the oracle's stand-in flash_attn package"]}
    wanted = releases()
    only = set(args.releases.split(",")) if args.releases else None
    for release, own in sorted(wanted.items()):
        if only and release not in only:
            continue
        done = cache / "packed" / f"transformers-{release}.json"
        archive = out / f"transformers-{release}.tar.xz"
        if args.resume and done.exists() and archive.exists():
            info = json.loads(done.read_text())  # packed and verified by an earlier run
        else:
            info = pack_release(release, own, cache, out)
            done.parent.mkdir(parents=True, exist_ok=True)
            done.write_text(json.dumps(info) + "\n")
        print(f"transformers {release}: {info['files']} files, {info['archive_bytes'] / 1e6:.2f} MB "
              f"(verified on {info['verified_batches']} batches)", flush=True)
        manifest["transformers"].append(info)
    wheels = out / "wheels"
    wheels.mkdir(exist_ok=True)
    for name, version in FLA_WHEELS:
        if not list(wheels.glob(f"{name.replace('-', '_')}-{version}-*.whl")):
            pip("download", "-q", "--no-deps", "-d", str(wheels), f"{name}=={version}")
    manifest["fla_wheels"] = sorted(f.name for f in wheels.glob("*.whl"))
    manifest["flash_attn_rotary"] = pack_rotary(cache, out)
    manifest["flash_attn_4"] = check_fa4(cache)
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    manifest["carry_bytes"] = total
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"carry {out}: {total / 1e6:.1f} MB; flash-attn-4: {manifest['flash_attn_4']['decision']}")
    if total > CARRY_LIMIT - (4 << 20):
        raise SystemExit("the carry is too close to the 64 MiB limit")


if __name__ == "__main__":
    main()
