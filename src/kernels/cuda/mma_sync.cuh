// The mma.sync kernels' tensor-core primitives (attention.cu, gated_delta.cu), apart from
// device_utils.cuh: included by the other kernels' files too, extra device functions there change
// their generated code (gated_linear.cu's, by NVVM's choices, session 18's review).
#pragma once

#include <cstdint>

namespace golinear::kernels::cuda::device {

// Four 8 × 8 bf16 matrices from shared memory (ldmatrix .x4; the lanes' row addresses), plain or
// transposed; the `_at` forms take a shared-space address (a kernel that steps its addresses by
// arithmetic on them, as gated_delta.cu's swizzled tiles).
__device__ __forceinline__ void ldsm_x4_at(uint32_t (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans_at(uint32_t (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  ldsm_x4_at(r, static_cast<unsigned>(__cvta_generic_to_shared(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const void* p) {
  ldsm_x4_trans_at(r, static_cast<unsigned>(__cvta_generic_to_shared(p)));
}
// d (16 × 8 fp32) += a (16 × 16 bf16, row) · b (16 × 8 bf16, col): mma.sync m16n8k16.
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace golinear::kernels::cuda::device
