# The read rate the H200 gives a stream of bf16 weights, and cuBLAS's one-row products at the 8B
# decode step's shapes, through PyTorch on the GPU machine (session 15, call 9): the anchor that
# says how near the decode GEMVs' 3.6-4.0 TB/s (BENCHMARKS.md, session 15) is to the machine's.
# Each weight has 4 copies, used in turn, so that L2 (50 MiB) holds none of the next one.
import json, os, torch
dev = 'cuda'
def timed(fn, reps=20):
    for _ in range(3): fn(0)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(reps):
        start.record(); fn(i); end.record(); torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2] * 1e-3  # seconds, median
out = {}
big = [torch.randn(1 << 30, device=dev, dtype=torch.bfloat16) for _ in range(2)]  # 2 GiB each
t = timed(lambda i: big[i % 2].sum())
out['sum 2 GiB bf16 (read rate, TB/s)'] = round(2 * 2**30 / t / 1e12, 3)
t = timed(lambda i: big[i % 2].amax())
out['amax 2 GiB bf16 (read rate, TB/s)'] = round(2 * 2**30 / t / 1e12, 3)
dst = torch.empty_like(big[0])
t = timed(lambda i: dst.copy_(big[i % 2]))
out['copy 2 GiB (read + write, TB/s)'] = round(2 * 2 * 2**30 / t / 1e12, 3)
del big, dst
shapes = {'qkv': (6144, 4096), 'o': (4096, 4096), 'gate_up': (28672, 4096), 'down': (4096, 14336),
          'lm_head': (128256, 4096)}
for name, (N, K) in shapes.items():
    ws = [torch.randn(N, K, device=dev, dtype=torch.bfloat16) for _ in range(4)]
    x = torch.randn(1, K, device=dev, dtype=torch.bfloat16)
    t = timed(lambda i: torch.nn.functional.linear(x, ws[i % 4]))
    out[f'cuBLAS linear 1x{K} by {N}x{K}: us, TB/s'] = [round(t * 1e6, 2), round(N * K * 2 / t / 1e12, 3)]
    del ws
print(json.dumps(out, indent=1))
