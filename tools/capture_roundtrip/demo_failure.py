#!/usr/bin/env python3
"""A failing forward pass (under torch.no_grad(): the capture records `pass: forward`) for
demonstrating `python -m attn_doctor.capture`: a tiny random Llama (flash_attention_2 over
the stand-in flash_attn beside this file) gets a packed batch whose collator built `cu_seq_lens_q/k` as int64 tensors, which flash-attn
rejects ("cu_seqlens_q must have dtype int32"). The first step (position ids only) runs.

    python -m attn_doctor.capture -- python tools/capture_roundtrip/demo_failure.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from roundtrip import load_model  # noqa: E402  (puts the stand-in first)

import torch  # noqa: E402

device = "cuda" if torch.cuda.is_available() else "cpu"
model, _ = load_model("llama", device, torch.bfloat16)

lengths = [5, 3, 4]
input_ids = torch.randint(0, 100, (1, sum(lengths)), device=device)
position_ids = torch.cat([torch.arange(n) for n in lengths]).view(1, -1).to(device)
cu_seq_lens = torch.tensor([0, 5, 8, 12], device=device)  # the bug: int64, no dtype=torch.int32

with torch.no_grad():
    model(input_ids=input_ids, position_ids=position_ids)
    print("step 1 (packed via position ids): ok")
    model(input_ids=input_ids, position_ids=position_ids, cu_seq_lens_q=cu_seq_lens,
          cu_seq_lens_k=cu_seq_lens, max_length_q=5, max_length_k=5)
    print("step 2: ok")
