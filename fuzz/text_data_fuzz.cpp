// Training/evaluation data on arbitrary bytes, as .jsonl and as .txt: read or refused with an
// error naming the line.
#include "fuzz_util.h"
#include "io/jsonl.h"
#include "io/text_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string jsonl = golinear::fuzz::fuzz_write("data.jsonl", data, size);
  (void)golinear::text_documents_read(jsonl);
  (void)golinear::jsonl_read(jsonl);
  const std::string txt = golinear::fuzz::fuzz_write("data.txt", data, size);
  (void)golinear::text_documents_read(txt);
  return 0;
}
