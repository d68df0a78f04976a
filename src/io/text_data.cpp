#include "io/text_data.h"

#include <lzma.h>

#include <memory>

#include "common/file.h"
#include "common/json.h"

namespace golinear {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<std::string> xz_read_file(const std::string& path) {
  GL_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::open(path));
  lzma_stream stream = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&stream, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
    return make_error(path, ": cannot start the xz decoder");
  std::string out;
  std::string buffer(1 << 20, '\0');
  stream.next_in = file->data();
  stream.avail_in = file->size();
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    stream.next_out = reinterpret_cast<uint8_t*>(buffer.data());
    stream.avail_out = buffer.size();
    ret = lzma_code(&stream, LZMA_FINISH);
    out.append(buffer.data(), buffer.size() - stream.avail_out);
  }
  lzma_end(&stream);
  if (ret != LZMA_STREAM_END) return make_error(path, ": corrupt or truncated xz data (lzma error ", (int)ret, ")");
  return out;
}

Result<std::vector<std::string>> text_documents_read(const std::string& path) {
  const bool xz = ends_with(path, ".xz");
  const std::string name = xz ? path.substr(0, path.size() - 3) : path;
  std::string content;
  if (xz) {
    GL_ASSIGN_OR_RETURN(content, xz_read_file(path));
  } else {
    GL_ASSIGN_OR_RETURN(content, file_read_text(path));
  }
  std::vector<std::string> documents;
  if (ends_with(name, ".jsonl")) {
    size_t start = 0;
    for (long number = 1; start < content.size(); ++number) {
      size_t end = content.find('\n', start);
      if (end == std::string::npos) end = content.size();
      std::string line = content.substr(start, end - start);
      start = end + 1;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string what = str_cat(path, ":", number);
      GL_ASSIGN_OR_RETURN(Json row, json_parse(line, what));
      GL_ASSIGN_OR_RETURN(std::string text, json_get<std::string>(row, "text", what));
      documents.push_back(std::move(text));
    }
  } else if (ends_with(name, ".txt")) {
    documents.push_back(std::move(content));
  } else {
    return make_error(path, ": unknown data format (expected .jsonl, .txt, or either with .xz)");
  }
  if (documents.empty()) return make_error(path, ": no documents");
  return documents;
}

}  // namespace golinear
