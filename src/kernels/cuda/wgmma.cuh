// Hopper's warpgroup MMA (wgmma) for the GDN state pass (gated_delta.cu): shared-memory matrix
// descriptors of the 128-byte swizzle, the fence / commit / wait of a wgmma group, and m64nNk16
// products with A from registers. Apart from device_utils.cuh (extra device functions there change
// other kernels' generated code, session 18's review).
#pragma once

#include <cstdint>

namespace golinear::kernels::cuda::device {

// Shared-memory matrix descriptor, 128-byte swizzle (tiles stored as atoms of R rows × 128 bytes,
// row r at 128 r, its 16-byte chunk c at 16 (c ^ (r & 7)); atoms 1024-byte aligned): K-major
// operands lbo 16 (unused), sbo 1024 (8-row groups), a k-step of 16 elements = 32 bytes inside an
// atom; MN-major operands lbo = the bytes between 64-column atoms, sbo 1024, a k-step of 16 rows
// = 2048 bytes.
__device__ __forceinline__ uint64_t wg_desc_sw128(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
         ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}
// The same layout `bytes` further on (the address field counts 16-byte units; shared addresses
// stay below 2^18).
__device__ __forceinline__ uint64_t wg_desc_advance(uint64_t d, uint32_t bytes) {
  return d + (bytes >> 4);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Generic-proxy shared-memory writes (cp.async, st.shared) made visible to wgmma's reads: each
// writing thread, before the barrier that publishes them.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#define GL_WGR_ACC8(d, o)                                                                   \
  "+f"(d[o][0]), "+f"(d[o][1]), "+f"(d[o][2]), "+f"(d[o][3]), "+f"(d[o + 1][0]),            \
      "+f"(d[o + 1][1]), "+f"(d[o + 1][2]), "+f"(d[o + 1][3]), "+f"(d[o + 2][0]),           \
      "+f"(d[o + 2][1]), "+f"(d[o + 2][2]), "+f"(d[o + 2][3]), "+f"(d[o + 3][0]),           \
      "+f"(d[o + 3][1]), "+f"(d[o + 3][2]), "+f"(d[o + 3][3]), "+f"(d[o + 4][0]),           \
      "+f"(d[o + 4][1]), "+f"(d[o + 4][2]), "+f"(d[o + 4][3]), "+f"(d[o + 5][0]),           \
      "+f"(d[o + 5][1]), "+f"(d[o + 5][2]), "+f"(d[o + 5][3]), "+f"(d[o + 6][0]),           \
      "+f"(d[o + 6][1]), "+f"(d[o + 6][2]), "+f"(d[o + 6][3]), "+f"(d[o + 7][0]),           \
      "+f"(d[o + 7][1]), "+f"(d[o + 7][2]), "+f"(d[o + 7][3])
#define GL_WGR_R32                                                                            \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define GL_WGR_R64                                                                            \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
  "%56, %57, %58, %59, %60, %61, %62, %63}"

// d (64 × 64) (+)= a (64 × 16, registers: warp w of the warpgroup gives rows 16w.. as the mma.sync
// m16n8k16 A fragment) · B (16 × 64, descriptor; TB = 0 K-major, 1 MN-major); scale_d = 0
// overwrites d. The accumulator of warp w is the mma.sync m16n8 C fragment of rows 16w.. per 8
// columns.
template <int TB>
__device__ __forceinline__ void wg_rs_n64(float (&d)[8][4], const uint32_t (&a)[4], uint64_t db,
                                          int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " GL_WGR_R32
               ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
               : GL_WGR_ACC8(d, 0)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB));
}
// d (64 × 128) (+)= a · B (16 × 128).
template <int TB>
__device__ __forceinline__ void wg_rs_n128(float (&d)[16][4], const uint32_t (&a)[4], uint64_t db,
                                           int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " GL_WGR_R64
               ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
               : GL_WGR_ACC8(d, 0), GL_WGR_ACC8(d, 8)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB));
}
#undef GL_WGR_ACC8
#undef GL_WGR_R32
#undef GL_WGR_R64

}  // namespace golinear::kernels::cuda::device
