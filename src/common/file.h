// Whole-file reads, atomic writes (temporary name, then rename) and read-only memory maps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"

namespace golinear {

Result<std::string> file_read_text(const std::string& path);
bool file_exists(const std::string& path);

// Writes `bytes` to `path` through `path.tmp.<pid>` and a rename, so a reader never sees a
// half-written file under the final name.
Status file_write_atomic(const std::string& path, const std::string& bytes);

// A read-only mapping of a whole file; unmapped when destroyed.
class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the pages of [begin, begin + bytes) from this process's memory (they are read again
  // from the file if touched): a caller streaming through a large file keeps its resident set
  // small. Only whole pages inside the range are dropped.
  void release(const uint8_t* begin, size_t bytes) const;

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace golinear
