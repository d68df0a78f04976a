#include "common/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace golinear {

Result<std::string> file_read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path, ": cannot open (", std::strerror(errno), ")");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return make_error(path, ": read error");
  return buffer.str();
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Status file_write_atomic(const std::string& path, const std::string& bytes) {
  std::string tmp = str_cat(path, ".tmp.", ::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return make_error(path, ": cannot create (", std::strerror(errno), ")");
  size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  bool flushed = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  bool closed = std::fclose(f) == 0;
  if (written != bytes.size() || !flushed || !closed) {
    std::remove(tmp.c_str());
    return make_error(path, ": write failed (", std::strerror(errno), ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return make_error(path, ": cannot rename into place (", std::strerror(errno), ")");
  }
  // Make the rename itself durable.
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (int fd = ::open(dir.c_str(), O_RDONLY); fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  return ok_status();
}

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return make_error(path, ": cannot open (", std::strerror(errno), ")");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return make_error(path, ": cannot stat (", std::strerror(errno), ")");
  }
  auto file = std::unique_ptr<MappedFile>(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return make_error(path, ": cannot map (", std::strerror(errno), ")");
    }
    file->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return file;
}

void MappedFile::release(const uint8_t* begin, size_t bytes) const {
  const uintptr_t page = (uintptr_t)::sysconf(_SC_PAGESIZE);
  const uintptr_t first = ((uintptr_t)begin + page - 1) / page * page;
  const uintptr_t last = ((uintptr_t)begin + bytes) / page * page;
  if (!data_ || last <= first) return;
  ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);  // advice only
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace golinear
