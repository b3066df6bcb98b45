// On XLA:CPU the device memory is the host's malloc. XLA:CPU allocates a
// program's temporaries afresh at every execution and frees them after, and
// glibc serves blocks that large with mmap (or from a per-thread heap it
// unmaps once empty), so every run of a program touches fresh pages: one
// page fault per 4 KiB. A compiled GPT-2-shaped training step faulted in
// ~450 MB a step (115k faults, 707 ms a step against 560 ms without them),
// and Strict Eager's per-op programs 2.2 GB a step (1307 ms against 717 ms).
// The remedy is what a CUDA caching allocator does for device memory: keep
// freed memory and reuse it. glibc does that when large blocks come from the
// main heap (no mmap), every thread allocates there (one arena), and freed
// memory at the top of the heap is kept up to 2 GiB. That costs the
// per-op path (below), so it is asked for with TORCH_TPU_KEEP_HOST_MEMORY=1;
// GLIBC_TUNABLES=glibc.malloc.hugetlb=1, set before Python starts, is the
// remedy without that cost (docs/design.md, "Host memory on XLA:CPU").
#include "runtime/host_allocator.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace torch_tpu::runtime {

bool keep_host_memory_requested() {
#if defined(__GLIBC__)
  // Opt-in: with every thread on one arena, the Python thread and XLA's
  // threads contend for its lock, and a Strict Eager op costs 40-60% more
  // (add of 1,000 floats 10.8 -> 15.8 us), while a step whose programs have
  // large temporaries runs up to 1.8x faster.
  const char* on = std::getenv("TORCH_TPU_KEEP_HOST_MEMORY");
  if (on == nullptr || std::strcmp(on, "1") != 0) return false;
  // A user who set glibc's malloc parameters chose them: leave them.
  for (const char* v : {"GLIBC_TUNABLES", "MALLOC_ARENA_MAX", "MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_"}) {
    const char* set = std::getenv(v);
    if (set != nullptr && *set != '\0' && (std::strcmp(v, "GLIBC_TUNABLES") != 0 || std::strstr(set, "malloc")))
      return false;
  }
  return true;
#else
  return false;
#endif
}

bool keep_freed_host_memory() {
#if defined(__GLIBC__)
  // Threads that already picked another arena keep it; XLA's have not
  // started yet. Under an allocator preloaded in glibc's place (jemalloc,
  // tcmalloc) these calls change glibc's unused parameters only.
  bool ok = mallopt(M_ARENA_MAX, 1) == 1;
  ok = mallopt(M_MMAP_MAX, 0) == 1 && ok;
  ok = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1 && ok;
  return ok;
#else
  return false;
#endif
}

}  // namespace torch_tpu::runtime
