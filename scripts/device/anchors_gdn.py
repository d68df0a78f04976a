# The Gated DeltaNet part of ../shared/anchors/anchors_kernels.py (same shapes, same call, same
# timing: median of 10 after 3 warm-ups, CUDA events): flash-linear-attention's
# chunk_gated_delta_rule forward (its snapshot unpacked at FLA_DIR), B = 1, H = 32, D = 128, bf16,
# T in 8K, 16K, 32K. Writes $OUT/anchors_gdn.json.
import json, os, sys, torch
from anchors_timing import bench
import torch.nn.functional as F
sys.path.insert(0, os.environ.get("FLA_DIR", "/tmp/fla"))
from fla.ops.gated_delta_rule import chunk_gated_delta_rule
OUT = os.environ.get("OUT", "/tmp/out")
H, D = 32, 128
rows = []
for T in [8192, 16384, 32768]:
    q = torch.randn(1, T, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, T, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, T, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = F.logsigmoid(torch.randn(1, T, H, device="cuda", dtype=torch.float32)).requires_grad_(True)
    beta = torch.rand(1, T, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    r = {"T": T, "fla_gdn_fwd_ms": bench(lambda: chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True))}
    rows.append(r); print(json.dumps(r), flush=True)
    del q, k, v, g, beta; torch.cuda.empty_cache()
json.dump(rows, open(os.path.join(OUT, "anchors_gdn.json"), "w"), indent=1)
