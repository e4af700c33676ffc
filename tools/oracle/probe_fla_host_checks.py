"""FLA's token_shift launch and rotary table assert, as the installed FLA release runs them (GPU).

  token_shift   token_shift(x, cu_seqlens) on x [1, TOTAL, 8] (bf16) packed from 752-token
                documents, for each TOTAL given: "ok" (and the largest difference from
                token_shift_ref) or the exception. FLA 0.3.1 - 0.5.0 launch the long kernel
                with the time chunks on grid axis y, which fails past 65535 chunks
                (fla-org/flash-linear-attention#903; launch.fla_grid).
  rotary        RotaryEmbedding(128) on q [1, 706, 8, 128] without cu_seqlens, its table built
                for max_seqlen = 256: FLA asserts TR >= T (rotary.table).

    PYTHONPATH=<fla release> python3 tools/oracle/probe_fla_host_checks.py 0.5.0 524280,524281
prints one JSON line: the release, torch, triton, the GPU and its multiprocessor count, the runs.
The results behind repro_cases/fla-0.5.*-token-shift-*: bench/results/fla-host-checks-h100-2026-11-27.jsonl.
"""

import json
import sys

import torch
import torch.nn.functional as F
import triton


def packed_cu_seqlens(total: int, doc_len: int) -> torch.Tensor:
    n = (total + doc_len - 1) // doc_len
    lens = torch.full((n,), doc_len, device="cuda", dtype=torch.long)
    lens[-1] -= n * doc_len - total
    return F.pad(lens.cumsum(0), (1, 0))


def main() -> None:
    release, totals = sys.argv[1], [int(t) for t in sys.argv[2].split(",")]
    props = torch.cuda.get_device_properties(0)
    out = {"release": release, "torch": torch.__version__, "triton": triton.__version__,
           "gpu": props.name, "sms": props.multi_processor_count, "runs": []}
    from fla.modules.token_shift import token_shift, token_shift_ref
    for total in totals:
        cu = packed_cu_seqlens(total, 752)
        x = torch.randn(1, total, 8, device="cuda", dtype=torch.bfloat16)
        rec = {"op": "token_shift", "total": total, "doc_len": 752, "docs": len(cu) - 1}
        try:
            y = token_shift(x, cu)
            torch.cuda.synchronize()
            rec["outcome"] = "ok"
            rec["max_abs_err"] = float((y.float() - token_shift_ref(x, cu).float()).abs().max())
        except Exception as e:  # the launch failure is what is measured
            rec["outcome"] = "raised"
            rec["error"] = f"{type(e).__name__}: {e}"[:400]
        out["runs"].append(rec)
    from fla.modules import RotaryEmbedding
    rotary = RotaryEmbedding(dim=128).cuda()
    q = torch.randn(1, 706, 8, 128, device="cuda", dtype=torch.bfloat16)
    rec = {"op": "rotary", "T": 706, "max_seqlen": 256, "cu_seqlens": None}
    try:
        rotary(q, q, max_seqlen=256)
        torch.cuda.synchronize()
        rec["outcome"] = "ok"
    except Exception as e:
        rec["outcome"] = "raised"
        rec["error"] = f"{type(e).__name__}: {e}"[:400]
    rec["table_rows"] = int(rotary._cos_cached.shape[0]) if rotary._cos_cached is not None else None
    out["runs"].append(rec)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
