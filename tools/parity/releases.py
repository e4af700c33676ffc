"""Every published transformers release from 4.36.0, grouped into code versions of what the
replay reproduces, each mapped to a rule set and to the golden that proves it.

    python releases.py fetch        # PyPI's release list + `pip download --no-deps` of every wheel
    python releases.py report --attn-doctor BUILD/attn-doctor    # code versions, goldens lacking
    python releases.py generate --attn-doctor BUILD/attn-doctor
        # fingerprints the wheels and writes tests/golden/releases.json, then renders
    python releases.py render [--check]
        # lib/convert/releases_table.inc and docs/spec/releases.md from tests/golden/releases.json
        # (no wheels needed; ctest runs --check)

Wheels go to $PARITY_WHEELS (default /work/venvs/wheels), never into the repository.

A code version is the set of normalised fingerprints of the code the replay reproduces (see
COMPONENTS): two releases whose fingerprints are equal run the same conversion code, so a golden of
one proves the replay for both. Normalisation parses each file with Python's `ast` and drops what
cannot change behaviour: comments (not in the tree), docstrings, type annotations and line
numbers. A release's rule set comes from the rule-set ranges of `attn-doctor list rules`; the
generator fails when one code version would span two rule sets or when a code version has no
golden, so the table it writes is always complete.
"""

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
GOLDEN = REPO / "tests" / "golden"
WHEELS = Path(os.environ.get("PARITY_WHEELS", "/work/venvs/wheels"))
PYPI = "https://pypi.org/pypi/transformers/json"
FIRST = (4, 36, 0)

PKG = "transformers/"
MFAU = PKG + "modeling_flash_attention_utils.py"
LLAMA = PKG + "models/llama/modeling_llama.py"

# Up to 4.42 the conversion is the Llama copy: these definitions of modeling_llama.py
LLAMA_COPY = {"_get_unpad_data", "LlamaFlashAttention2._flash_attention_forward", "LlamaFlashAttention2._upad_input"}

# What each golden kind proves, and the files whose code it depends on. `None` = the whole module;
# a list = only those top-level definitions. "conversion" additionally follows the names that
# modeling_flash_attention_utils.py imports from inside transformers (the version checks,
# availability helpers, masking/padding helpers) to their definitions.
COMPONENTS = {
    # transformers-<release>.json: _flash_attention_forward (from 4.43) or the Llama copy (up to 4.42)
    "conversion": [
        (MFAU, None),
        (PKG + "integrations/flash_attention.py", None),
    ],
    # gemma2-generate-<release>.json: the model around the conversion (its attention layer slices
    # the mask and keys, its mask builder shapes the mask)
    "gemma2": [(PKG + "models/gemma2/modeling_gemma2.py", re.compile(
        r"Gemma2(\w*Attention\w*|DecoderLayer)|Gemma2Model\._update_causal_mask|\w+\.prepare_inputs_for_generation"))],
    # qwen2vl-forward-<release>.json: which position ids the model hands to the conversion
    "qwen2_vl": [(PKG + "models/qwen2_vl/modeling_qwen2_vl.py", re.compile(
        r"Qwen2VL\w*Attention\w*|Qwen2VL(Text)?Model\.forward|Qwen2VLDecoderLayer"))],
}
GOLDEN_FILE = {
    "conversion": "transformers-{}.json",
    "gemma2": "gemma2-generate-{}.json",
    "qwen2_vl": "qwen2vl-forward-{}.json",
}


# --- versions ---------------------------------------------------------------------------------

VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:rc(\d+))?")


def vkey(text):
    """Sort key of the releases this table holds (X.Y.Z and X.Y.ZrcN)."""
    m = VERSION.fullmatch(text)
    if not m:
        return None
    return (int(m[1]), int(m[2]), int(m[3]), int(m[4]) if m[4] is not None else 1 << 30)


def release_key(text):
    """Sort key of a rule-set bound (always X.Y.Z)."""
    return vkey(text)


# --- PyPI -------------------------------------------------------------------------------------

def pypi_releases(index):
    """[(version, status)] for every release >= FIRST, in PEP 440 order. status: "release",
    "pre-release" (rcN) or "yanked" (every file of the release yanked)."""
    out = []
    for version, files in index["releases"].items():
        key = vkey(version)
        if key is None or key[:3] < FIRST or not files:
            if key is None and not version.startswith(("0.", "1.", "2.", "3.")) and files:
                raise SystemExit(f"unexpected release name on PyPI: {version} (extend vkey)")
            continue
        if all(f.get("yanked") for f in files):
            status = "yanked"
        elif key[3] != 1 << 30:
            status = "pre-release"
        else:
            status = "release"
        out.append((version, status))
    out.sort(key=lambda r: vkey(r[0]))
    return out


def wheel(version):
    return WHEELS / f"transformers-{version}-py3-none-any.whl"


def fetch(args):
    WHEELS.mkdir(parents=True, exist_ok=True)
    index_path = WHEELS / "transformers.json"
    subprocess.run(["curl", "-sSf", "-o", str(index_path), PYPI], check=True)
    index = json.loads(index_path.read_text())
    for version, _ in pypi_releases(index):
        if wheel(version).exists():
            continue
        print(f"downloading transformers {version}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--dest", str(WHEELS), f"transformers=={version}"], check=True)


# --- fingerprints -----------------------------------------------------------------------------

class _Normalise(ast.NodeTransformer):
    """Drops docstrings and type annotations; what is left is the code that runs."""

    def _body(self, node):
        self.generic_visit(node)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:] or [ast.Pass()]
        node.body = body
        return node

    def visit_Module(self, node):
        return self._body(node)

    def visit_ClassDef(self, node):
        return self._body(node)

    def visit_FunctionDef(self, node):
        node.returns = None
        return self._body(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_arg(self, node):
        node.annotation = None
        return node

    def visit_AnnAssign(self, node):
        self.generic_visit(node)
        if node.value is None:
            return None  # a bare annotation in a class body (TypedDict fields) declares nothing that runs
        return ast.Assign(targets=[node.target], value=node.value)


def normalise(source, names=None):
    """The normalised dump of a module, or of the top-level definitions `names` ("Class.method"
    selects one method of a class; a compiled pattern selects the names it matches in full)."""
    tree = _Normalise().visit(ast.parse(source))
    if names is not None:
        wanted = names.fullmatch if hasattr(names, "fullmatch") else names.__contains__
        kept = []
        for node in tree.body:
            name = getattr(node, "name", None)
            if name is not None and wanted(name):
                kept.append(node)
            elif isinstance(node, ast.ClassDef):
                methods = [m for m in node.body if wanted(f"{name}.{getattr(m, 'name', None)}")]
                if methods:
                    node.body, node.bases, node.decorator_list = methods, [], []
                    kept.append(node)
        tree.body = kept
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def internal_imports(source, module_path):
    """(module file, name) for every `from .x import name` of the module: the helpers it uses."""
    out = []
    package = module_path.rsplit("/", 1)[0].split("/")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = package[:len(package) - (node.level - 1)]
            parts = base + (node.module.split(".") if node.module else [])
            for alias in node.names:
                out.append(("/".join(parts), alias.name))
    return out


def resolve_definition(files, module, name, depth=0):
    """The normalised top-level definition of `name` reached from `module` (a package or a module
    path without .py), following re-exports; None when it is not a function or class of transformers."""
    if depth > 4:
        return None
    for path in (module + ".py", module + "/__init__.py"):
        if path not in files:
            continue
        source = files[path]()
        tree = ast.parse(source)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                return normalise(source, {name})
        for dep_module, dep_name in internal_imports(source, path):
            if dep_name == name:
                return resolve_definition(files, dep_module, name, depth + 1)
        # lazy re-exports (utils/__init__.py's import structure): a top-level module that defines it
        return None
    return None


def fingerprint(version):
    """The component fingerprints of one wheel, cached beside the wheels (keyed by this file's
    fingerprint code, so a change of COMPONENTS or of the normalisation recomputes them)."""
    cache_path = WHEELS / "fingerprints.json"
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    if cache.get("code") != code:
        cache = {"code": code, "wheels": {}}
    key = f"{wheel(version).name}:{wheel(version).stat().st_size}"
    if key not in cache["wheels"]:
        cache["wheels"][key] = _fingerprint(version)
        cache_path.write_text(json.dumps(cache))
    return cache["wheels"][key]


def _fingerprint(version):
    with zipfile.ZipFile(wheel(version)) as z:
        names = set(z.namelist())
        files = {n: (lambda n=n: z.read(n).decode("utf-8")) for n in names if n.endswith(".py")}
        parts = {}
        for component, entries in COMPONENTS.items():
            texts = []
            for path, defs in entries:
                if path in files:
                    texts.append(f"{path}\n{normalise(files[path](), defs)}")
            if component == "conversion":
                if MFAU in files:
                    for module, name in sorted(set(internal_imports(files[MFAU](), MFAU))):
                        if name == "logging":
                            continue
                        found = resolve_definition(files, module, name)
                        if found is not None:
                            texts.append(f"{module}:{name}\n{found}")
                else:  # up to 4.42: the Llama copy is the conversion
                    texts.append(f"{LLAMA}\n{normalise(files[LLAMA](), LLAMA_COPY)}")
            parts[component] = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:12] if texts else None
        return parts



# --- rule sets --------------------------------------------------------------------------------

def rule_sets(binary):
    out = subprocess.run([binary, "list", "rules", "--format", "json"], check=True, capture_output=True, text=True)
    return [r for r in json.loads(out.stdout) if r["library"] == "transformers"]


def rule_set_for(version, rules):
    """The rule set whose documented range holds `version` (PEP 440 order: 5.0.0rc0 < 5.0.0)."""
    key = vkey(version)
    for r in rules:
        first = release_key(r["first"])[:3] + (0,)  # a range's first release includes its rcs
        last = release_key(r["last"]) if r["last"] else None
        if first <= key and (last is None or key <= last):
            return r["name"]
    raise SystemExit(f"transformers {version} lies in no rule set's range (attn-doctor list rules)")


# --- the table --------------------------------------------------------------------------------

def build(index, binary):
    rules = rule_sets(binary)
    releases = []
    for version, status in pypi_releases(index):
        if not wheel(version).exists():
            raise SystemExit(f"{wheel(version)} is missing: run `python releases.py fetch`")
        fp = fingerprint(version)
        releases.append({"release": version, "status": status, "rule_set": rule_set_for(version, rules),
                         "fingerprint": fp})
    goldens = {c: {p.name[len(f.split("{")[0]):-len(".json")] for p in GOLDEN.glob(f.replace("{}", "*"))}
               for c, f in GOLDEN_FILE.items()}
    # code versions: equal conversion code under one rule set, in release order
    versions = {}
    for r in releases:
        key = (r["fingerprint"]["conversion"], r["rule_set"])
        versions.setdefault(key, []).append(r)
    table = []
    missing = []
    for n, ((conversion, rule_set), members) in enumerate(versions.items(), 1):
        recorded = [m["release"] for m in members if m["release"] in goldens["conversion"]]
        golden = recorded[-1] if recorded else None
        if golden is None and any(m["status"] == "release" for m in members):
            missing.append(f"{span([m['release'] for m in members])} ({rule_set}, code {conversion}): "
                           f"no transformers-<release>.json; record one of "
                           + ", ".join(m["release"] for m in members if m["status"] == "release"))
        entry = {"code_version": f"c{n:02d}", "conversion": conversion,
                 "rule_set": rule_set if golden else None, "range_rule_set": rule_set,
                 "releases": [m["release"] for m in members], "golden": golden, "goldens": recorded}
        table.append(entry)
        for m in members:
            m["code_version"] = entry["code_version"]
            m["golden"] = golden
            if golden is None:  # a yanked release or release candidate whose code no golden covers
                m["rule_set"] = None
    # model code (Gemma-2, Qwen2-VL): which releases share the code of a recorded model golden
    for component in ("gemma2", "qwen2_vl"):
        by_fp = {}
        for r in releases:
            if r["release"] in goldens[component]:
                by_fp.setdefault(r["fingerprint"][component], []).append(r["release"])
        for r in releases:
            fp = r["fingerprint"][component]
            r.setdefault("model_golden", {})[component] = None if fp is None else (by_fp.get(fp) or [""])[-1] or "none"
    return releases, table, missing


def span(names):
    return names[0] if len(names) == 1 else f"{names[0]} - {names[-1]}"


def write_json(releases, table, index):
    published = [r["release"] for r in releases]
    doc = {
        "format": "attn-doctor/releases@1",
        "generated_by": "python tools/parity/releases.py generate",
        "library": "transformers",
        "source": PYPI,
        "first": published[0],
        "newest": published[-1],
        "normalisation": "ast of each file without docstrings, type annotations or line numbers; sha256, 12 hex digits",
        "components": {c: [p if d is None else f"{p} ({d if isinstance(d, set) else d.pattern})" for p, d in e]
                       + (["names modeling_flash_attention_utils.py imports from transformers",
                           f"{LLAMA} ({', '.join(sorted(LLAMA_COPY))}) where that module does not exist"]
                          if c == "conversion" else [])
                       for c, e in COMPONENTS.items()},
        "code_versions": table,
        "releases": [{"release": r["release"], "status": r["status"], "code_version": r["code_version"],
                      "rule_set": r["rule_set"], "golden": r["golden"], "fingerprint": r["fingerprint"],
                      "model_goldens": r["model_golden"]} for r in releases],
    }
    (GOLDEN / "releases.json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc


STATUS_CPP = {"release": "published", "yanked": "yanked", "pre-release": "pre_release"}


def render_cpp(releases):
    lines = ["// Generated by tools/parity/releases.py from PyPI's transformers release list and the release",
             "// wheels (tests/golden/releases.json holds the fingerprints): do not edit, regenerate.",
             "// {release, status, code version, rule set, golden release of that code version}"]
    for r in releases:
        if r["rule_set"] is None:
            continue
        lines.append(f'{{"{r["release"]}", KnownStatus::{STATUS_CPP[r["status"]]}, "{r["code_version"]}", '
                     f'"{r["rule_set"]}", "{r["golden"]}"}},')
    return "\n".join(lines) + "\n"


def model_cell(value):
    return "-" if value is None else ("no golden" if value == "none" else value)


def render_docs(doc):
    releases, table = doc["releases"], doc["code_versions"]
    first, newest = releases[0]["release"], releases[-1]["release"]
    counts = {s: sum(r["status"] == s for r in releases) for s in ("release", "yanked", "pre-release")}
    out = [
        "# transformers releases: code versions, rule sets, goldens",
        "",
        "<!-- generated by `python tools/parity/releases.py render` from tests/golden/releases.json: do not edit -->",
        "",
        f"Every transformers release published on PyPI from {first} to {newest}: {len(releases)} releases "
        f"({counts['release']} final, {counts['yanked']} yanked, {counts['pre-release']} release candidates). "
        "Each maps to a **code version**: releases whose conversion code is identical after normalisation "
        "(comments, docstrings, type annotations and line numbers dropped, via Python's `ast`) share one, so "
        "the golden of one of them (`tests/golden/transformers-<release>.json`, recorded from the release's "
        "own code by `tools/parity`) proves the replay for all of them. The conversion code is "
        "`modeling_flash_attention_utils.py`, `integrations/flash_attention.py` and the definitions "
        "`modeling_flash_attention_utils.py` imports from inside transformers (version checks, availability, "
        "padding helpers); up to 4.42, where that module does not exist, the Llama copy "
        "(`_get_unpad_data`, `LlamaFlashAttention2._flash_attention_forward` and `_upad_input` of "
        "`models/llama/modeling_llama.py`). A code version never spans two rule sets (the table is keyed on "
        "both), and `tests/test_release_table.cpp` holds the registry to this table: every release maps "
        "exactly to its rule set, and its code version's golden exists and is replayed by "
        "`tests/test_convert_golden.cpp`.",
        "",
        "Yanked releases and release candidates are listed as well; they are mapped (known) where their "
        "code version has a golden, else marked not mapped. A release that is not mapped (never published, "
        "newer than the table, or a candidate whose code no golden covers) is replayed with the nearest "
        "known release at or below it, and the report says so "
        "([conversions.md](conversions.md#choosing-a-rule-set)).",
        "",
        "The model-level columns show, for the Gemma-2 generate and Qwen2-VL forward quirks, the release "
        "whose model golden (`gemma2-generate-<release>.json`, `qwen2vl-forward-<release>.json`) was recorded "
        "from the same model code (the attention, decoder-layer, mask and generate-input definitions of "
        "`modeling_gemma2.py`; the attention, decoder-layer and model `forward` of `modeling_qwen2_vl.py`), "
        "`no golden` where none was, `-` where the release has no such model. Model code outside those "
        "files (generate, the caches) is not fingerprinted.",
        "",
        "## Code versions",
        "",
        "| code version | releases | rule set | conversion code | golden release |",
        "|---|---|---|---|---|",
    ]
    for t in table:
        rule_set = f"`{t['rule_set']}`" if t["rule_set"] else f"not mapped (range of `{t['range_rule_set']}`)"
        out.append(f"| {t['code_version']} | {span(t['releases'])} ({len(t['releases'])}) | {rule_set} | "
                   f"`{t['conversion']}` | {', '.join(t['goldens'])} |")
    unmapped = [r["release"] for r in releases if r["rule_set"] is None]
    if unmapped:
        out += ["", f"Not mapped (no golden of their code; a batch naming one gets the unknown-release notice "
                f"and the nearest known release below it): {', '.join(unmapped)}."]
    out += ["", "## Releases", "",
            "| release | status | code version | rule set | golden release | Gemma-2 model golden | Qwen2-VL model golden |",
            "|---|---|---|---|---|---|---|"]
    for r in releases:
        status = "" if r["status"] == "release" else r["status"]
        rule_set = f"`{r['rule_set']}`" if r["rule_set"] else "not mapped"
        out.append(f"| {r['release']} | {status} | {r['code_version']} | {rule_set} | {r['golden'] or '-'} | "
                   f"{model_cell(r['model_goldens']['gemma2'])} | {model_cell(r['model_goldens']['qwen2_vl'])} |")
    return "\n".join(out) + "\n"


OUTPUTS = {
    REPO / "lib" / "convert" / "releases_table.inc": lambda doc: render_cpp(doc["releases"]),
    REPO / "docs" / "spec" / "releases.md": render_docs,
}


def render(args):
    """Writes (or with --check compares) the C++ table and the docs page from tests/golden/releases.json."""
    doc = json.loads((GOLDEN / "releases.json").read_text())
    stale = []
    for path, fn in OUTPUTS.items():
        text = fn(doc)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(REPO)))
        else:
            path.write_text(text)
    if stale:
        raise SystemExit("not generated from tests/golden/releases.json (run `python tools/parity/releases.py "
                         "render`): " + ", ".join(stale))


def generate(args):
    index = json.loads((WHEELS / "transformers.json").read_text())
    releases, table, missing = build(index, args.attn_doctor)
    if missing:
        raise SystemExit("code versions without a golden:\n  " + "\n  ".join(missing))
    write_json(releases, table, index)
    render(argparse.Namespace(check=False))
    print(f"{len(releases)} releases, {len(table)} code versions", file=sys.stderr)


def report(args):
    """What generate would write, without writing: the code versions and the goldens they lack."""
    index = json.loads((WHEELS / "transformers.json").read_text())
    releases, table, missing = build(index, args.attn_doctor)
    for t in table:
        print(f"{t['code_version']} {span(t['releases']):18} {t['range_rule_set']:10} {t['conversion']} "
              f"golden={t['golden']}")
    for m in missing:
        print("MISSING", m)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["fetch", "generate", "report", "render"])
    ap.add_argument("--check", action="store_true", help="render: fail when the outputs are not current")
    ap.add_argument("--attn-doctor", default=str(REPO / "build" / "attn-doctor"),
                    help="the attn-doctor binary whose `list rules` gives the rule-set ranges")
    args = ap.parse_args()
    {"fetch": fetch, "generate": generate, "report": report, "render": render}[args.what](args)


if __name__ == "__main__":
    main()
