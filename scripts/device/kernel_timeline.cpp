// A CUPTI injection library that times every kernel a process runs, graph nodes included (the GPU
// machine has no nsys, and Nsight Compute times each kernel alone, caches flushed, without the
// programmatic-dependent overlap of a decode graph):
//   CUDA_INJECTION64_PATH=/tmp/libkernel_timeline.so KERNEL_TIMELINE_OUT=FILE PROGRAM ...
// writes at exit one line per (kernel, grid, dynamic shared memory) — launches, total µs, mean
// µs — sorted by total, for the kernels run inside CUDA graphs (KERNEL_TIMELINE_ALL=1: every
// kernel), then the sum of their durations, the time at least one of them ran (their union) and
// the span from the first start to the last end. KERNEL_TIMELINE_TRACE=FIRST:COUNT also writes the
// kernels FIRST .. FIRST + COUNT − 1 (in order of start) one a line: start and end in µs from the
// first one's start, duration, grid, name — where a chain of programmatic dependents overlaps.
// Build here: g++ -O2 -shared -fPIC scripts/device/kernel_timeline.cpp -I/usr/local/cuda/include \
//   -L/usr/local/cuda/lib64 -lcupti -o carry2/libkernel_timeline.so
// (a measuring tool of the benchmarks, not part of golinear).
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

struct Stat {
  unsigned long long launches = 0;
  double total_ns = 0;
};

std::mutex mu;
std::map<std::tuple<std::string, int, int, int, int>, Stat>* stats = nullptr;
std::vector<std::pair<uint64_t, uint64_t>>* spans = nullptr;
struct Record {
  uint64_t start, end;
  int gx, gy, gz;
  std::string name;
};
std::vector<Record>* records = nullptr;  // KERNEL_TIMELINE_TRACE
bool all_kernels = false;

std::string short_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : mangled;
  std::free(d);
  for (size_t a; (a = s.find("(anonymous namespace)::")) != std::string::npos;) s.erase(a, 23);
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  const size_t paren = s.find('(');
  if (paren != std::string::npos) s.resize(paren);  // the template arguments stay
  const size_t ns = s.rfind("::", s.find('<') == std::string::npos ? s.size() : s.find('<'));
  if (ns != std::string::npos) s = s.substr(ns + 2);
  if (s.size() > 90) s.resize(90);
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    if (!all_kernels && k->graphId == 0) continue;
    Stat& s = (*stats)[{short_name(k->name), k->gridX, k->gridY, k->gridZ, k->dynamicSharedMemory}];
    ++s.launches;
    s.total_ns += (double)(k->end - k->start);
    spans->push_back({k->start, k->end});
    if (records) records->push_back({k->start, k->end, k->gridX, k->gridY, k->gridZ, short_name(k->name)});
  }
  std::free(buffer);
}

void write_report() {
  cuptiActivityFlushAll(1);
  const char* out = std::getenv("KERNEL_TIMELINE_OUT");
  FILE* f = out ? std::fopen(out, "w") : stderr;
  if (!f) return;
  std::lock_guard<std::mutex> lock(mu);
  std::vector<std::pair<double, std::string>> lines;
  double sum_ns = 0;
  for (const auto& [key, s] : *stats) {
    const auto& [name, gx, gy, gz, smem] = key;
    char buf[256];
    std::snprintf(buf, sizeof buf, "%10llu %12.1f %9.2f  grid %d,%d,%d smem %d  %s", s.launches,
                  s.total_ns / 1e3, s.total_ns / 1e3 / s.launches, gx, gy, gz, smem, name.c_str());
    lines.push_back({s.total_ns, buf});
    sum_ns += s.total_ns;
  }
  std::sort(lines.rbegin(), lines.rend());
  std::fprintf(f, "  launches     total µs   mean µs  kernel\n");
  for (const auto& l : lines) std::fprintf(f, "%s\n", l.second.c_str());
  std::sort(spans->begin(), spans->end());
  double busy = 0;
  uint64_t cur_b = 0, cur_e = 0;
  for (const auto& [b, e] : *spans) {
    if (b > cur_e) {
      busy += (double)(cur_e - cur_b);
      cur_b = b, cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  busy += (double)(cur_e - cur_b);
  const double span = spans->empty() ? 0 : (double)(cur_e - spans->front().first);
  std::fprintf(f, "# %zu kernels: sum of durations %.1f µs, busy (union) %.1f µs, span %.1f µs\n",
               spans->size(), sum_ns / 1e3, busy / 1e3, span / 1e3);
  if (records) {
    long first = 0, count = 0;
    std::sscanf(std::getenv("KERNEL_TIMELINE_TRACE"), "%ld:%ld", &first, &count);
    std::sort(records->begin(), records->end(),
              [](const Record& a, const Record& b) { return a.start < b.start; });
    const long last = std::min<long>(first + count, (long)records->size());
    for (long i = first; i < last; ++i) {
      const Record& r = (*records)[i];
      const double t0 = (double)(*records)[first].start;
      std::fprintf(f, "trace %8.2f %8.2f %7.2f  grid %d,%d,%d  %s\n", (r.start - t0) / 1e3,
                   (r.end - t0) / 1e3, (r.end - r.start) / 1e3, r.gx, r.gy, r.gz, r.name.c_str());
    }
  }
  if (f != stderr) std::fclose(f);
}

}  // namespace

extern "C" int InitializeInjection() {
  stats = new std::map<std::tuple<std::string, int, int, int, int>, Stat>();
  spans = new std::vector<std::pair<uint64_t, uint64_t>>();
  const char* all = std::getenv("KERNEL_TIMELINE_ALL");
  all_kernels = all && std::strcmp(all, "1") == 0;
  if (std::getenv("KERNEL_TIMELINE_TRACE")) records = new std::vector<Record>();
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 0;
  if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) return 0;
  std::atexit(write_report);
  return 1;
}
