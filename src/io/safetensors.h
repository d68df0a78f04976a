// safetensors files: an 8-byte little-endian header size, a JSON header mapping tensor names to
// {dtype, shape, data_offsets}, then the data. Reading maps the file and validates everything the
// format promises (offsets contiguous from 0, sizes matching shapes, the file length) before any
// tensor is handed out.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/result.h"

namespace golinear {

enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL };

const char* dtype_name(DType dtype);
size_t dtype_size(DType dtype);

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // inside the mapped file
  size_t nbytes = 0;
  int64_t numel() const;
};

std::string shape_string(const std::vector<int64_t>& shape);

class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);

  const TensorView* find(const std::string& name) const;
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return file_->path(); }
  // Drops the mapped pages of [begin, begin + bytes) (inside a tensor's data) from memory.
  void release(const uint8_t* begin, size_t bytes) const { file_->release(begin, bytes); }

 private:
  std::unique_ptr<MappedFile> file_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Converts a floating-point tensor (F32, F16, BF16, F64) to fp32.
Status tensor_to_f32(const TensorView& tensor, float* out, const std::string& file);

// One tensor to write, stored as F32.
struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

// Writes a safetensors file atomically (temporary name, then rename).
Status safetensors_write(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// One pass over a safetensors file too large to hold: the header (every tensor's name, dtype and
// shape, data in that order) is written first, then the data through append(), in order.
// finish() checks that exactly the announced bytes came and closes the file; a writer dropped
// before finish() removes its file. The caller writes into a temporary directory or name.
class SafetensorsStreamWriter {
 public:
  struct Entry {
    std::string name;
    DType dtype = DType::BF16;
    std::vector<int64_t> shape;
  };
  static Result<std::unique_ptr<SafetensorsStreamWriter>> create(
      const std::string& path, const std::vector<Entry>& tensors,
      const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsStreamWriter();
  SafetensorsStreamWriter(const SafetensorsStreamWriter&) = delete;
  SafetensorsStreamWriter& operator=(const SafetensorsStreamWriter&) = delete;

  // The next `bytes` of the data section (tensors back to back in the header's order).
  Status append(const void* data, size_t bytes);
  Status finish();
  uint64_t data_bytes() const { return total_; }

 private:
  SafetensorsStreamWriter() = default;
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t total_ = 0;    // bytes the header announces
  uint64_t written_ = 0;  // data bytes appended so far
};

float bf16_to_f32(uint16_t bits);
// fp32 → bf16 rounded to nearest even (any NaN → 0x7fff), bit for bit as CUDA's __float2bfloat16.
uint16_t f32_to_bf16(float x);
float f16_to_f32(uint16_t bits);

}  // namespace golinear
