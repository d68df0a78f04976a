// Training/evaluation data on arbitrary bytes, as .jsonl, as .txt and as xz-compressed .jsonl.xz
// (liblzma through io/text_data.cpp's xz_read_file): read or refused with an error naming the
// file (and the line, for JSONL). The xz seeds (xz_*) are small valid streams to mutate.
#include "fuzz_util.h"
#include "io/jsonl.h"
#include "io/text_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string jsonl = golinear::fuzz::fuzz_write("data.jsonl", data, size);
  (void)golinear::text_documents_read(jsonl);
  (void)golinear::jsonl_read(jsonl);
  const std::string txt = golinear::fuzz::fuzz_write("data.txt", data, size);
  (void)golinear::text_documents_read(txt);
  const std::string xz = golinear::fuzz::fuzz_write("data.jsonl.xz", data, size);
  (void)golinear::text_documents_read(xz);
  return 0;
}
