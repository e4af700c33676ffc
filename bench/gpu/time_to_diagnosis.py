#!/usr/bin/env python3
"""Time to a diagnosis: attn-doctor's checked kernels versus compute-sanitizer on a call that
crashes the real stack.

Two crashing calls, each run three ways in fresh processes (wall clock, process start and
CUDA initialisation included, as a user would experience it):
  1. plain:      the real call (PyTorch / FA2): the symptom the user sees;
  2. memcheck:   the same call under `compute-sanitizer --tool memcheck`, the usual way to
                 find such a crash;
  3. diagnosis:  `attn-doctor check FILE --backend cuda` when --attn-doctor and a batch file
                 are given, else our checked kernel on the same inputs through libad_bench.so
                 (the stage the tool runs), printing the refused access.

Cases:
  gather     Gemma-2 on transformers 4.44.0 (Dao-AILab/flash-attention#1156): the key gather of _upad_input
             with indices from a mask wider than the keys -> "index out of bounds" device assert.
  attention  FA2 varlen with cu_seqlens_q pointing 2^30 rows past q -> illegal memory access.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CASES = {
    "gather": r'''
import torch, sys
B, Lk, Lmask, H, D = 4, 3000, 4096, 8, 128
key = torch.randn(B * Lk, H, D, dtype=torch.bfloat16, device="cuda")
mask = torch.ones(B, Lmask, dtype=torch.bool)          # the mask is wider than the keys
indices = mask.flatten().nonzero().flatten().cuda()     # indices up to B * Lmask - 1
MODE
''',
    "attention": r'''
import torch, sys, math
H, D, L = 16, 128, 4096
q = torch.randn(2 * L, H, D, dtype=torch.bfloat16, device="cuda")
k = torch.randn(2 * L, H, D, dtype=torch.bfloat16, device="cuda")
v = torch.randn(2 * L, H, D, dtype=torch.bfloat16, device="cuda")
cu_q = torch.tensor([0, 1 << 30, (1 << 30) + L], dtype=torch.int32, device="cuda")  # corrupted
cu_k = torch.tensor([0, L, 2 * L], dtype=torch.int32, device="cuda")
MODE
''',
}

REAL = {
    "gather": '''
out = key[indices]          # index_first_axis
torch.cuda.synchronize()
print("no crash")
''',
    "attention": '''
out = torch.ops.aten._flash_attention_forward(q, k, v, cu_q, cu_k, L, L, 0.0, True, False)[0]
torch.cuda.synchronize()
print("no crash")
''',
}

OURS = {
    "gather": '''
sys.path.insert(0, BENCH_DIR)
import bench_kernels as bk
lib = bk.load_lib(LIB)
rec = bk.Record(lib)
out = torch.empty(indices.numel(), H, D, dtype=torch.bfloat16, device="cuda")
rec.reset()
bk.check_rc(lib, lib.ad_index_copy(0, key.data_ptr(), B * Lk, out.data_ptr(), indices.numel(), H * D * 2,
            indices.data_ptr(), indices.numel(), 1, rec.dev.data_ptr(), None))
torch.cuda.synchronize()
f = rec.fields()
print(f"unpad.gather: index {f['index']} outside [0, {f['bound']}) ({f['count']} refused rows)")
''',
    "attention": '''
sys.path.insert(0, BENCH_DIR)
import bench_kernels as bk
lib = bk.load_lib(LIB)
rec = bk.Record(lib)
out = torch.full_like(q, float("nan"))
lse = torch.empty(H, 2 * L, dtype=torch.float32, device="cuda")
rec.reset()
bk.check_rc(lib, lib.ad_varlen_fwd(0, q.data_ptr(), 2 * L, out.data_ptr(), lse.data_ptr(), k.data_ptr(),
            v.data_ptr(), 2 * L, cu_q.data_ptr(), cu_k.data_ptr(), 2, H, H, D, L, L, 1 / math.sqrt(D), 1, -1, -1,
            0.0, 1, 0, rec.dev.data_ptr(), None))
torch.cuda.synchronize()
f = rec.fields()
print(f"attention.access: row {f['index']} outside [0, {f['bound']}) ({f['count']} refused accesses)")
''',
}


def run(cmd, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = "timeout", (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
    return time.monotonic() - t0, rc, out


def first_line(text, *needles):
    for line in text.splitlines():
        if any(n in line for n in needles):
            return line.strip()[:200]
    return text.strip().splitlines()[-1][:200] if text.strip() else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--sanitizer", default="compute-sanitizer")
    ap.add_argument("--attn-doctor", help="attn-doctor binary with the CUDA backend")
    ap.add_argument("--gather-batch", help="batch file of the gather case for `attn-doctor check`")
    ap.add_argument("--attention-batch", help="batch file of the attention case for `attn-doctor check`")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--json")
    ap.add_argument("--cases", nargs="+", default=list(CASES))
    args = ap.parse_args()
    bench_dir = os.path.dirname(os.path.abspath(__file__))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases:
            scripts = {}
            for mode, body in (("real", REAL[name]), ("ours", OURS[name])):
                src = CASES[name].replace("MODE", body).replace("BENCH_DIR", repr(bench_dir)).replace(
                    "LIB", repr(os.path.abspath(args.lib)))
                path = os.path.join(tmp, f"{name}_{mode}.py")
                with open(path, "w") as f:
                    f.write(src)
                scripts[mode] = path
            t_plain, rc_plain, out_plain = run([sys.executable, scripts["real"]], args.timeout)
            t_mc, rc_mc, out_mc = run([args.sanitizer, "--tool", "memcheck", "--print-limit", "5",
                                       sys.executable, scripts["real"]], args.timeout)
            batch = getattr(args, f"{name}_batch")
            if args.attn_doctor and batch:
                how = f"attn-doctor check {os.path.basename(batch)} --backend cuda"
                t_ours, rc_ours, out_ours = run([args.attn_doctor, "check", batch, "--backend", "cuda", "-q"],
                                                args.timeout)
            else:
                how = "checked kernel via libad_bench.so (same inputs)"
                t_ours, rc_ours, out_ours = run([sys.executable, scripts["ours"]], args.timeout)
            r = {
                "case": name,
                "plain": {"s": t_plain, "rc": rc_plain,
                          "symptom": first_line(out_plain, "Error", "error", "assert", "no crash")},
                "memcheck": {"s": t_mc, "rc": rc_mc,
                             "finding": first_line(out_mc, "Invalid", "assert", "ERROR SUMMARY")},
                "memcheck_errors": first_line(out_mc, "ERROR SUMMARY"),
                "diagnosis": {"s": t_ours, "rc": rc_ours, "how": how,
                              "finding": first_line(out_ours, "unpad.gather", "attention.access", "violation")},
            }
            r["memcheck_over_diagnosis"] = t_mc / t_ours if t_ours > 0 else None
            results.append(r)
            print(f"[{name}] plain {t_plain:6.1f}s rc={rc_plain} ({r['plain']['symptom']})", flush=True)
            print(f"[{name}] memcheck {t_mc:6.1f}s rc={rc_mc} ({r['memcheck']['finding']}; {r['memcheck_errors']})",
                  flush=True)
            print(f"[{name}] attn-doctor {t_ours:6.1f}s rc={rc_ours} ({r['diagnosis']['finding']}) via {how}",
                  flush=True)
            print(f"[{name}] memcheck / attn-doctor = {r['memcheck_over_diagnosis']:.1f}x", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
