"""Golden for the convolution contract of an empty segment (tests/golden/conv1d-empty-segment.json).

AReaL's own Qwen3.5 GatedDeltaNet (areal/experimental/models/archon/qwen3_5/model/model.py,
AReaL v1.0.2 - v2.0.0), without the causal-conv1d package, convolves each cu_seqlens segment
of the row on its own: a depthwise nn.Conv1d (kernel 4, padding 3, no bias) on the slice
[cu[i], cu[i+1]) of a [B, C, T] tensor, then silu and the first (e - s) columns. This driver
runs that shape of call on the segments of areal-project/AReaL#1103's cu_seqlens
([0, 512, 1024, 1024]) in the torch it is started with and prints one JSON record; run it
once per torch environment and merge the records (--merge).

    python tools/parity/conv_empty_segment.py            # one record on stdout
    python tools/parity/conv_empty_segment.py --merge A.json B.json ... > tests/golden/conv1d-empty-segment.json
"""

import json
import sys

CU = [0, 512, 1024, 1024]
ROWS, CHANNELS, KERNEL = 1, 8, 4


def record():
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    conv = nn.Conv1d(CHANNELS, CHANNELS, kernel_size=KERNEL, groups=CHANNELS, bias=False, padding=KERNEL - 1)
    x = torch.randn(ROWS, CHANNELS, CU[-1])
    segments = []
    for i in range(len(CU) - 1):
        s, e = CU[i], CU[i + 1]
        entry = {"segment": i, "start": s, "end": e}
        try:
            y = F.silu(conv(x[:, :, s:e])[:, :, : e - s])
            entry["result"] = {"shape": list(y.shape)}
        except Exception as ex:  # the contract is which segment raises and how
            entry["raises"] = {"type": type(ex).__name__, "message": str(ex)}
        segments.append(entry)
    return {"torch": torch.__version__, "device": "cpu", "python": sys.version.split()[0], "segments": segments}


def main(argv):
    if argv[:1] == ["--merge"]:
        records = [json.load(open(p)) for p in argv[1:]]
        out = {"format": "attn-doctor/golden@1", "golden": "conv1d-empty-segment",
               "call": {"rows": ROWS, "channels": CHANNELS, "kernel": KERNEL, "padding": KERNEL - 1,
                        "groups": CHANNELS, "cu_seqlens": CU},
               "reference": "areal-project/AReaL#1103",
               "records": sorted(records, key=lambda r: r["torch"])}
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    json.dump(record(), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
