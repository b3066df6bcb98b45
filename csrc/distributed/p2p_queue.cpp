// The queue of posted point-to-point transfers (p2p_queue.h): one per
// process, whatever group posted them, so that a collective of any group
// runs them first and every rank's programs between two devices keep one
// order.
#include "distributed/p2p_queue.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <tuple>

namespace torch_tpu::distributed::p2p {
namespace {

std::mutex g_mutex;
std::vector<TransferRef> g_posted;
std::atomic<size_t> g_count{0};
uint64_t g_seq = 0;
thread_local bool t_flushing = false;

}  // namespace

void post(const TransferRef& t) {
  std::lock_guard<std::mutex> lock(g_mutex);
  t->seq = g_seq++;
  g_posted.push_back(t);
  g_count.store(g_posted.size(), std::memory_order_relaxed);
}

bool pending() { return g_count.load(std::memory_order_relaxed) != 0; }

void flush() {
  if (t_flushing || !pending()) return;
  std::vector<TransferRef> batch;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    batch.swap(g_posted);
    g_count.store(0, std::memory_order_relaxed);
  }
  std::stable_sort(batch.begin(), batch.end(), [](const TransferRef& a, const TransferRef& b) {
    return std::make_tuple(a->lo, a->hi, !a->upward, a->seq) < std::make_tuple(b->lo, b->hi, !b->upward, b->seq);
  });
  t_flushing = true;
  std::string failed;
  for (auto& t : batch) {
    if (failed.empty()) {
      try {
        t->result = t->run();
      } catch (const c10::Error& e) {
        failed = e.what_without_backtrace();
        t->error = failed;
      } catch (const std::exception& e) {
        failed = e.what();
        t->error = failed;
      }
    } else {
      t->error = "tpu_dist: " + t->what + " was not run: a point-to-point transfer before it failed (" + failed + ")";
    }
    t->run = nullptr;  // drops the tensors it held
    t->done.store(true, std::memory_order_release);
  }
  t_flushing = false;
}

}  // namespace torch_tpu::distributed::p2p
