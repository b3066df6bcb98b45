// wait_ready_until (ready_wait.h): helper threads block in XLA, callers
// sleep until they signal or the deadline passes.
#include "distributed/ready_wait.h"

#include <Python.h>
#include <c10/util/Exception.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/modes.h"

namespace torch_tpu::distributed {
namespace {

// One wait: the helper fills in done/error, the caller sleeps on cv.
struct Request {
  runtime::BufferRef buf;
  std::string what;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::string error;
};

// Helper threads, started on demand and kept. One suffices for a caller
// that waits for one collective at a time; another starts only when no
// helper is idle: several threads wait at once, or a wait timed out and its
// helper is still in XLA (until XLA's own collective timeout fails the
// program; should the interpreter be finalizing by then, that helper's
// return into Python may abort the exiting process, as for any thread
// still in a call that released the GIL).
class Helpers {
 public:
  void submit(std::shared_ptr<Request> r) {
    std::lock_guard<std::mutex> lock(m_);
    queue_.push_back(std::move(r));
    // every queued request is claimed by its own idle helper, never by one
    // that may be blocked for good behind a wait that timed out
    if (static_cast<int>(queue_.size()) > idle_) {
      std::thread([this] { serve(); }).detach();
    } else {
      cv_.notify_one();
    }
  }

 private:
  void serve() {
    // This thread's Python state, kept for its life without the GIL between
    // waits: creating and deleting one per wait (PyGILState_Ensure on a
    // thread without one) cost more than the wait's hand-off.
    PyGILState_Ensure();
    PyEval_SaveThread();
    for (;;) {
      std::shared_ptr<Request> r;
      {
        std::unique_lock<std::mutex> lock(m_);
        ++idle_;
        cv_.wait(lock, [&] { return !queue_.empty(); });
        --idle_;
        r = std::move(queue_.front());
        queue_.pop_front();
      }
      std::string error;
      try {
        runtime::xla_buffer_wait(*r->buf, r->what.c_str());  // takes the GIL, which XLA releases while it waits
      } catch (const c10::Error& e) {
        error = e.what_without_backtrace();
      } catch (const std::exception& e) {
        error = e.what();
      }
      {
        std::lock_guard<std::mutex> lock(r->m);
        r->done = true;
        r->error = std::move(error);
      }
      r->cv.notify_one();
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Request>> queue_;
  int idle_ = 0;
};

Helpers& helpers() {
  static auto* h = new Helpers();  // never destroyed: helpers may outlive static destruction
  return *h;
}

// Releases the GIL for a scope if this thread holds it (the helper needs it
// to call into jax).
class GilRelease {
 public:
  GilRelease() : state_(PyGILState_Check() ? PyEval_SaveThread() : nullptr) {}
  ~GilRelease() {
    if (state_) PyEval_RestoreThread(state_);
  }

 private:
  PyThreadState* state_;
};

}  // namespace

bool wait_ready_until(const runtime::BufferRef& b, std::chrono::steady_clock::time_point deadline,
                      const std::string& what) {
  if (runtime::buffer_ready(b)) {
    runtime::xla_buffer_wait(*b, what.c_str());  // returns at once; raises if its program failed
    return true;
  }
  auto r = std::make_shared<Request>();
  r->buf = b;
  r->what = what;
  helpers().submit(r);
  {
    GilRelease unlock;
    std::unique_lock<std::mutex> lock(r->m);
    if (!r->cv.wait_until(lock, deadline, [&] { return r->done; })) return false;
  }
  TORCH_CHECK(r->error.empty(), r->error);
  return true;
}

}  // namespace torch_tpu::distributed
