# The full-attention part of ../shared/anchors/anchors_kernels.py (same shapes, same timing:
# median of 10 after 3 warm-ups, CUDA events): PyTorch SDPA causal forward and forward + backward,
# Llama-3.1-8B attention shapes (H 32, G 8, D 128, bf16), B = 1, T in 8K, 16K, 32K; the backend
# SDPA chose is printed. Writes $OUT/anchors_attention.json.
import json, os, torch
from anchors_timing import bench
import torch.nn.functional as F
OUT = os.environ.get("OUT", "/tmp/out")
H, HKV, D = 32, 8, 128
rows = []
for T in [8192, 16384, 32768]:
    q = torch.randn(1, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, HKV, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, HKV, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    r = {"T": T, "sdpa_fwd_ms": bench(f)}
    o = f(); do = torch.randn_like(o)
    def fb():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True); o.backward(do)
    r["sdpa_fwdbwd_ms"] = bench(fb)
    r["tflops_fwd"] = round(4 * T * T * D * H / 2 / (r["sdpa_fwd_ms"] * 1e-3) / 1e12, 1)
    rows.append(r); print(json.dumps(r), flush=True)
    del q, k, v, o, do; torch.cuda.empty_cache()
try:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        q = torch.randn(1, H, 4096, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(1, HKV, 4096, D, device="cuda", dtype=torch.bfloat16)
        F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True); torch.cuda.synchronize()
    names = sorted({e.name for e in prof.events() if "attention" in e.name.lower() or "flash" in e.name.lower() or "fmha" in e.name.lower()})
    print("sdpa kernels:", names[:4], flush=True)
except Exception as e:
    print("profiler failed:", e, flush=True)
json.dump({"attention": rows, "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}, open(os.path.join(OUT, "anchors_attention.json"), "w"), indent=1)
