// Point-to-point transfers wait here until a flush runs them
// (docs/design.md, "Point-to-point"). A transfer is a 2-replica program
// over its two ranks' devices that both ranks must run, in the same order
// relative to their other programs. NCCL's isend/irecv start at once and
// progress on their own; here both ranks of an exchange (rank 0: isend to 1,
// irecv from 1; rank 1: isend to 0, irecv from 0) would each run their
// send's program first, and the two programs would never meet. So isend,
// irecv and batch_isend_irecv only post; the next flush (a wait() on any
// point-to-point Work, a blocking send or recv, any collective of any group)
// runs everything posted, in one canonical order every rank derives alone:
// by pair (lower job rank, higher job rank), then the transfers from the
// lower rank to the higher before those the other way, then posting order.
// Two ranks that posted the same transfers between them then run them in
// the same order, and transfers of different pairs cannot wait on each
// other in a cycle (the first pending one in that order always has both of
// its ranks at it).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu::distributed::p2p {

struct Transfer {
  std::string what;        // "send to rank 1 on group ..." (errors name it)
  int64_t lo = 0, hi = 0;  // the pair's job ranks, lo < hi
  bool upward = true;      // the elements move from lo to hi
  // Runs the transfer's program now; returns the buffer to wait for.
  std::function<runtime::BufferRef()> run;
  // Set by the flush: `result`, or `error` (this transfer's program
  // failed, or an earlier one did and this one was not run).
  std::atomic<bool> done{false};
  runtime::BufferRef result;
  std::string error;
  uint64_t seq = 0;  // posting order (post sets it)
};
using TransferRef = std::shared_ptr<Transfer>;

void post(const TransferRef& t);
// Runs every posted transfer in the canonical order. After a transfer fails
// the rest are not run (each would wait for its peer until the timeout):
// they are done with its error. A flush inside a flush (a transfer's
// program is a collective) returns at once.
void flush();
bool pending();

}  // namespace torch_tpu::distributed::p2p
