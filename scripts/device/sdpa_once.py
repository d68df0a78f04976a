# One SDPA causal forward + backward at Llama-3.1-8B attention shapes (H 32, G 8, D 128, bf16,
# B = 1) for T from argv (default 8192), after one warm-up: for Nsight Compute to profile cuDNN's
# kernels beside golinear's (session10_call1.sh).
import sys, torch
import torch.nn.functional as F
T = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
H, HKV, D = 32, 8, 128
q = torch.randn(1, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
k = torch.randn(1, HKV, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
v = torch.randn(1, HKV, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
for _ in range(2):
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    o.backward(torch.randn_like(o))
torch.cuda.synchronize()
