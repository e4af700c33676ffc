#!/usr/bin/env python3
"""The checked d128 forward captured in a CUDA graph and replayed (its tensor maps are encoded
at capture, from the pointers of that call, like the other params): the replay must write the
bits an eager call writes and record nothing. bf16, H = 8, segments of 1000, 2048 and 777 rows
(whole and partial tiles)."""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../gpu"))
from bench_kernels import Record, check_rc, load_lib  # noqa: E402


def main():
    lib = load_lib(sys.argv[sys.argv.index("--lib") + 1])
    record = Record(lib)
    torch.manual_seed(0)
    lens, H, d = [1000, 2048, 777], 8, 128
    total = sum(lens)
    q, k, v = (torch.randn(total, H, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
    out = torch.empty_like(q)
    lse = torch.empty(H, total, dtype=torch.float32, device="cuda")
    ok = True
    for causal in (0, 1):
        def call(stream):
            record.reset()
            check_rc(lib, lib.ad_varlen_fwd(0, q.data_ptr(), total, out.data_ptr(), lse.data_ptr(), k.data_ptr(),
                                            v.data_ptr(), total, cu.data_ptr(), cu.data_ptr(), len(lens), H, H, d,
                                            max(lens), max(lens), 1.0 / math.sqrt(d), causal, -1, -1, 0.0, 1, 0,
                                            record.dev.data_ptr(), stream))
        out.fill_(float("nan"))
        call(torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        eager = out.clone()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            call(s.cuda_stream)  # warm-up on the capture stream
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            call(torch.cuda.current_stream().cuda_stream)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        same = torch.equal(out, eager)
        count = record.fields()["count"]
        print(f"causal={causal}: graph replay identical to eager: {same}; record count {count}; "
              f"NaN in output: {bool(out.isnan().any())}")
        ok = ok and same and count == 0 and not bool(out.isnan().any())
    print("graph check", "passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
