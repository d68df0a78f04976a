#include "io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/json.h"

namespace golinear {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit

struct DTypeInfo {
  const char* name;
  DType dtype;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {"F32", DType::F32, 4}, {"F16", DType::F16, 2}, {"BF16", DType::BF16, 2},
    {"F64", DType::F64, 8}, {"I64", DType::I64, 8}, {"I32", DType::I32, 4},
    {"I16", DType::I16, 2}, {"I8", DType::I8, 1},   {"U8", DType::U8, 1},
    {"BOOL", DType::BOOL, 1},
};

}  // namespace

const char* dtype_name(DType dtype) {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return info.name;
  return "?";
}

size_t dtype_size(DType dtype) {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return info.size;
  return 0;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  auto result = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  GL_ASSIGN_OR_RETURN(result->file_, MappedFile::open(path));
  const MappedFile& file = *result->file_;
  if (file.size() < 8) return make_error(path, ": not a safetensors file (shorter than 8 bytes)");
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | file.data()[i];
  if (header_size > kMaxHeaderBytes)
    return make_error(path, ": safetensors header size ", header_size, " exceeds the limit of ",
                      kMaxHeaderBytes, " bytes");
  if (header_size > file.size() - 8)
    return make_error(path, ": safetensors header size ", header_size,
                      " runs past the end of the file (", file.size(), " bytes)");
  std::string header_text(reinterpret_cast<const char*>(file.data() + 8), header_size);
  GL_ASSIGN_OR_RETURN(Json header, json_parse(header_text, path + " (safetensors header)"));
  if (!header.is_object()) return make_error(path, ": safetensors header is not a JSON object");

  const uint8_t* data_start = file.data() + 8 + header_size;
  const uint64_t data_size = file.size() - 8 - header_size;
  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return make_error(path, ": __metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          return make_error(path, ": __metadata__ value for '", key, "' is not a string");
        result->metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string what = str_cat(path, ": tensor '", name, "'");
    if (!entry.is_object()) return make_error(what, " has no {dtype, shape, data_offsets} entry");
    GL_ASSIGN_OR_RETURN(std::string dtype_text, json_get<std::string>(entry, "dtype", what));
    GL_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                        json_get<std::vector<int64_t>>(entry, "shape", what));
    GL_ASSIGN_OR_RETURN(std::vector<uint64_t> offsets,
                        json_get<std::vector<uint64_t>>(entry, "data_offsets", what));
    TensorView view;
    view.name = name;
    const DTypeInfo* info = nullptr;
    for (const auto& candidate : kDTypes)
      if (dtype_text == candidate.name) info = &candidate;
    if (!info) return make_error(what, " has unsupported dtype '", dtype_text, "'");
    view.dtype = info->dtype;
    uint64_t numel = 1;
    for (int64_t d : shape) {
      if (d < 0) return make_error(what, " has a negative dimension in shape ", shape_string(shape));
      if (d > 0 && numel > (UINT64_MAX / 16) / (uint64_t)d)
        return make_error(what, " has an impossibly large shape ", shape_string(shape));
      numel *= (uint64_t)d;
    }
    view.shape = shape;
    if (offsets.size() != 2 || offsets[0] > offsets[1])
      return make_error(what, " has invalid data_offsets");
    if (offsets[1] > data_size)
      return make_error(what, " data_offsets [", offsets[0], ", ", offsets[1],
                        "] run past the end of the data (", data_size, " bytes)");
    if (offsets[1] - offsets[0] != numel * info->size)
      return make_error(what, " occupies ", offsets[1] - offsets[0], " bytes but ", dtype_text,
                        shape_string(shape), " needs ", numel * info->size);
    view.data = data_start + offsets[0];
    view.nbytes = offsets[1] - offsets[0];
    spans.push_back({offsets[0], offsets[1], result->tensors_.size()});
    result->tensors_.push_back(std::move(view));
  }
  // The data must be covered exactly: sorted spans contiguous from 0 to the end of the file.
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  uint64_t cursor = 0;
  for (const Span& span : spans) {
    const std::string& name = result->tensors_[span.index].name;
    if (span.begin < cursor)
      return make_error(path, ": tensor '", name, "' overlaps the data of another tensor");
    if (span.begin > cursor)
      return make_error(path, ": gap in the data before tensor '", name, "' (offset ", span.begin,
                        ", expected ", cursor, ")");
    cursor = span.end;
  }
  if (cursor != data_size)
    return make_error(path, ": file length does not match its header (tensors end at ", cursor,
                      " bytes of data, the file holds ", data_size, ")");
  for (size_t i = 0; i < result->tensors_.size(); ++i)
    result->index_[result->tensors_[i].name] = i;
  return result;
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

float bf16_to_f32(uint16_t bits) {
  uint32_t u = (uint32_t)bits << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // NaN: CUDA's canonical bf16 NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return (uint16_t)(u >> 16);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t u;
  if (exponent == 0) {
    if (mantissa == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      exponent = 127 - 15 + 1;
      while (!(mantissa & 0x400)) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3ff;
      u = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    u = sign | 0x7f800000u | (mantissa << 13);
  } else {
    u = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

Status tensor_to_f32(const TensorView& tensor, float* out, const std::string& file) {
  const int64_t n = tensor.numel();
  switch (tensor.dtype) {
    case DType::F32:
      if (n > 0) std::memcpy(out, tensor.data, n * 4);  // a 0-element tensor's `out` may be null
      return ok_status();
    case DType::F64:
      for (int64_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, tensor.data + 8 * i, 8);
        out[i] = (float)d;
      }
      return ok_status();
    case DType::BF16:
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, tensor.data + 2 * i, 2);
        out[i] = tensor.dtype == DType::BF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
      }
      return ok_status();
    default:
      return make_error(file, ": tensor '", tensor.name, "' has dtype ", dtype_name(tensor.dtype),
                        ", expected a floating-point type (F32, F16, BF16)");
  }
}

namespace {

// The 8-byte size and the JSON header of `tensors` stored back to back in order, padded so the
// data starts 8-byte aligned (as the format suggests); `data_bytes` receives the data's size.
std::string safetensors_header_bytes(const std::vector<SafetensorsStreamWriter::Entry>& tensors,
                                     const std::map<std::string, std::string>& metadata,
                                     uint64_t* data_bytes) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const uint64_t bytes = (uint64_t)n * dtype_size(t.dtype);
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header_text = header.dump();
  while ((8 + header_text.size()) % 8) header_text += ' ';
  std::string bytes(8, '\0');
  const uint64_t size = header_text.size();
  for (int i = 0; i < 8; ++i) bytes[i] = (char)((size >> (8 * i)) & 0xff);
  *data_bytes = offset;
  return bytes + header_text;
}

}  // namespace

Status safetensors_write(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsStreamWriter::Entry> entries;
  for (const auto& t : tensors) entries.push_back({t.name, DType::F32, t.shape});
  uint64_t data_bytes = 0;
  std::string bytes = safetensors_header_bytes(entries, metadata, &data_bytes);
  bytes.reserve(bytes.size() + data_bytes);
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    bytes.append(reinterpret_cast<const char*>(t.data), (size_t)n * 4);
  }
  return file_write_atomic(path, bytes);
}

Result<std::unique_ptr<SafetensorsStreamWriter>> SafetensorsStreamWriter::create(
    const std::string& path, const std::vector<Entry>& tensors,
    const std::map<std::string, std::string>& metadata) {
  std::unique_ptr<SafetensorsStreamWriter> writer(new SafetensorsStreamWriter());
  writer->path_ = path;
  const std::string header = safetensors_header_bytes(tensors, metadata, &writer->total_);
  writer->file_ = std::fopen(path.c_str(), "wb");
  if (!writer->file_) return make_error(path, ": cannot create (", std::strerror(errno), ")");
  if (std::fwrite(header.data(), 1, header.size(), writer->file_) != header.size())
    return make_error(path, ": write failed (", std::strerror(errno), ")");
  return writer;
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (!file_) return;
  std::fclose(file_);  // unfinished: nothing to report from a destructor, the file goes
  std::remove(path_.c_str());
}

Status SafetensorsStreamWriter::append(const void* data, size_t bytes) {
  if (!file_) return make_error(path_, ": append after finish");
  if (written_ + bytes > total_)
    return make_error(path_, ": ", written_ + bytes, " data bytes written, the header announces ",
                      total_);
  if (std::fwrite(data, 1, bytes, file_) != bytes)
    return make_error(path_, ": write failed (", std::strerror(errno), ")");
  written_ += bytes;
  return ok_status();
}

Status SafetensorsStreamWriter::finish() {
  if (!file_) return make_error(path_, ": finished twice");
  if (written_ != total_)
    return make_error(path_, ": ", written_, " data bytes written, the header announces ", total_);
  std::FILE* f = file_;
  file_ = nullptr;
  const bool flushed = std::fflush(f) == 0;
  if (std::fclose(f) != 0 || !flushed) {
    std::remove(path_.c_str());
    return make_error(path_, ": write failed (", std::strerror(errno), ")");
  }
  return ok_status();
}

}  // namespace golinear
