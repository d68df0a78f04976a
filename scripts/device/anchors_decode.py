# The KV-decode part of ../shared/anchors/anchors_kernels.py (same shapes, same timing: median of
# 50 after 3 warm-ups, CUDA events): SDPA's decode step over a KV cache of T tokens, Llama-3.1-8B
# attention shapes (H 32, G 8, D 128, bf16), B = 1. Writes $OUT/anchors_decode.json.
import json, os, torch
from anchors_timing import bench
import torch.nn.functional as F
OUT = os.environ.get("OUT", "/tmp/out")
H, HKV, D = 32, 8, 128
rows = []
for T in [4096, 32768, 131072]:
    q = torch.randn(1, H, 1, D, device="cuda", dtype=torch.bfloat16)
    kc = torch.randn(1, HKV, T, D, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn(1, HKV, T, D, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        rows.append({"ctx": T, "sdpa_decode_ms": bench(lambda: F.scaled_dot_product_attention(q, kc, vc, enable_gqa=True), iters=50)})
    print(json.dumps(rows[-1]), flush=True)
    del kc, vc
json.dump({"decode": rows, "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}, open(os.path.join(OUT, "anchors_decode.json"), "w"), indent=1)
