# The timing of ../shared/anchors/anchors_kernels.py, shared by the anchors_*.py parts of it here:
# the median of `iters` runs after `warm` warm-ups, each between two CUDA events.
import torch
def bench(fn, warm=3, iters=10):
    for _ in range(warm): fn()
    torch.cuda.synchronize()
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(iters):
        st.record(); fn(); en.record(); torch.cuda.synchronize(); ts.append(st.elapsed_time(en))
    ts.sort(); return ts[len(ts) // 2]
