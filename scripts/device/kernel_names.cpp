// A CUPTI injection library that lists the kernels a process launches (the GPU machine has no
// nsys): CUDA_INJECTION64_PATH=/tmp/libkernel_names.so KERNEL_NAMES_OUT=FILE PROGRAM ...
// writes each distinct kernel symbol (mangled, template arguments included) once to FILE at
// exit, then the launch count. Launches recorded into a CUDA graph are seen while captured.
// Build here: g++ -O2 -shared -fPIC scripts/device/kernel_names.cpp -I/usr/local/cuda/include \
//   -L/usr/local/cuda/lib -lcupti -o carry2/libkernel_names.so
// (scripts/device/session14_call2.sh; a tool of the sanitizer evidence, not part of golinear).
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace {

std::mutex mu;
std::set<std::string>* names = nullptr;
unsigned long long launches = 0;

void CUPTIAPI on_api(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite != CUPTI_API_ENTER || !cb->symbolName) return;
  std::lock_guard<std::mutex> lock(mu);
  names->insert(cb->symbolName);
  ++launches;
}

void write_names() {
  const char* out = std::getenv("KERNEL_NAMES_OUT");
  FILE* f = out ? std::fopen(out, "w") : stderr;
  if (!f) return;
  std::lock_guard<std::mutex> lock(mu);
  for (const std::string& n : *names) std::fprintf(f, "%s\n", n.c_str());
  std::fprintf(f, "# %llu launches, %zu kernels\n", launches, names->size());
  if (f != stderr) std::fclose(f);
}

}  // namespace

extern "C" int InitializeInjection() {
  names = new std::set<std::string>();
  CUpti_SubscriberHandle sub;
  if (cuptiSubscribe(&sub, on_api, nullptr) != CUPTI_SUCCESS) return 0;
  cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
  cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
  std::atexit(write_names);
  return 1;
}
