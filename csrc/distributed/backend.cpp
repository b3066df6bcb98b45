// The tpu_dist c10d::Backend (backend.h). A call prepares each tensor's
// elements as one dense device buffer (running deferred work it depends on:
// in Fused Eager that flushes the traces the inputs come from), runs the
// collective's program now, and swaps the results into the output tensors'
// storages. XLA runs programs in order per device, so a collective sits in
// program order with the ops around it; Work::wait waits for its results
// within the group's timeout.
#include "distributed/backend.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "device/storage.h"
#include "distributed/p2p_queue.h"
#include "distributed/programs.h"
#include "distributed/ready_wait.h"
#include "exec/op_runner.h"
#include "lowering/context.h"
#include "runtime/collective_runtime.h"
#include "runtime/deferred_checks.h"
#include "runtime/donation.h"
#include "runtime/modes.h"

namespace torch_tpu::distributed {
namespace {

using runtime::BufferRef;
using Clock = std::chrono::steady_clock;

// Waits until `b` is computed, raising DistBackendError past `deadline` or
// if its program failed. The caller sleeps while a helper thread blocks in
// XLA (ready_wait.h): no polling, which took CPU from the peer rank on a
// shared machine and overslept short collectives.
void wait_ready(const BufferRef& b, Clock::time_point deadline, std::chrono::milliseconds limit,
                const std::string& what) {
  bool ready;
  try {
    ready = wait_ready_until(b, deadline, what);
  } catch (const c10::Error& e) {
    runtime::note_job_failure();
    C10_THROW_ERROR(DistBackendError, c10::str("tpu_dist: ", what, " failed: ", e.what_without_backtrace()));
  }
  if (!ready) {
    runtime::note_job_failure();
    C10_THROW_ERROR(DistBackendError,
                    c10::str("tpu_dist: ", what, " did not finish within the timeout of ", limit.count(),
                             " ms: a rank of the group did not join it (it is not running this collective, "
                             "is blocked, or died)"));
  }
}

// Finished once every result buffer is computed. The future holds the
// results at once: like a CUDA stream's, its values are usable in program
// order on the device (an op reading them runs after the collective).
// A point-to-point Work stands for posted transfers (p2p_queue.h): wait(),
// isCompleted(), getFuture() and result() run them first (a flush).
class TpuWork final : public c10d::Work {
 public:
  TpuWork(c10d::OpType type, std::string what, std::vector<BufferRef> pending, std::vector<at::Tensor> result,
          std::chrono::milliseconds timeout, std::vector<p2p::TransferRef> transfers = {})
      : Work(-1, type), what_(std::move(what)), pending_(std::move(pending)), result_(std::move(result)),
        transfers_(std::move(transfers)), timeout_(timeout) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    future_->markCompleted(c10::IValue(result_));
  }

  bool isCompleted() override {
    start();
    if (!transfers_.empty()) return false;
    for (const auto& b : pending_)
      if (!runtime::buffer_ready(b)) return false;
    return true;
  }
  bool isSuccess() const override { return error_.empty() && transfer_error_.empty(); }
  std::vector<at::Tensor> result() override {
    start();
    return result_;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    start();
    return future_;
  }

  bool wait(std::chrono::milliseconds timeout) override {
    auto limit = timeout == kNoTimeout ? timeout_ : timeout;
    auto deadline = Clock::now() + limit;
    // transfers another thread's flush is running (rare): wait for them
    for (start(); !transfers_.empty(); start()) {
      if (Clock::now() > deadline) {
        error_ = c10::str("tpu_dist: ", what_, " did not finish within the timeout of ", limit.count(), " ms");
        C10_THROW_ERROR(DistBackendError, error_);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!transfer_error_.empty()) C10_THROW_ERROR(DistBackendError, transfer_error_);
    for (const auto& b : pending_) {
      try {
        wait_ready(b, deadline, limit, what_);
      } catch (const c10::Error& e) {
        error_ = e.what_without_backtrace();
        throw;
      }
    }
    pending_.clear();
    // the host waited: the rank check of this collective (run_on) and any
    // other deferred check on the device report here
    if (runtime::checks_pending()) {
      try {
        runtime::run_checks(0);
      } catch (const c10::Error& e) {
        error_ = e.what_without_backtrace();
        throw;
      }
    }
    return true;
  }

 private:
  // Runs the posted transfers (every one posted, p2p_queue.h); what they
  // computed joins the buffers to wait for, their errors wait() raises.
  void start() {
    if (transfers_.empty()) return;
    p2p::flush();
    std::vector<p2p::TransferRef> running;  // by another thread's flush
    for (auto& t : transfers_) {
      if (!t->done.load(std::memory_order_acquire)) {
        running.push_back(t);
      } else if (!t->error.empty()) {
        if (transfer_error_.empty()) transfer_error_ = t->error;
      } else {
        pending_.push_back(t->result);
      }
    }
    transfers_ = std::move(running);
  }

  std::string what_;
  std::vector<BufferRef> pending_;
  std::vector<at::Tensor> result_;
  std::vector<p2p::TransferRef> transfers_;
  std::chrono::milliseconds timeout_;
  std::string error_, transfer_error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// What a failed rank check (programs.h, with_rank_check) raises: the ranks
// called the collective with different programs, so none ran it. `ranks`:
// the group rank of each replica of a point-to-point program (empty: the
// replicas are the group's ranks).
class RankCheck final : public runtime::DeferredCheck {
 public:
  RankCheck(std::string what, int rank, hlo::ElementType e, int64_t out_n, int64_t program, std::vector<int> ranks)
      : what_(std::move(what)), rank_(rank), e_(e), out_n_(out_n), program_(program), ranks_(std::move(ranks)) {}
  [[noreturn]] void raise(int64_t value, bool deferred) const override {
    runtime::note_job_failure();
    int64_t other = ranks_.empty() || value < 0 || value >= static_cast<int64_t>(ranks_.size()) ? value : ranks_[value];
    std::string mine = c10::str("(rank ", rank_, ": ", out_n_, " ", hlo::element_name(e_), " ",
                                ranks_.empty() ? "result elements" : "elements", ", program #", program_ % 100000, ")");
    std::string after = deferred ? "; the result tensors hold their old values where a collective works in place, "
                                   "else zeros or undefined values"
                                 : "";
    if (!ranks_.empty())
      C10_THROW_ERROR(DistBackendError,
                      c10::str("tpu_dist: ", what_, ": the two ranks' point-to-point transfers do not pair up, so it ",
                               "was not run: rank ", other, " ran another transfer than this rank ", mine,
                               ". A send and the recv that meets it need the same number of elements and dtype, and ",
                               "the sends and recvs between two ranks pair up in posting order (two ranks that both "
                               "call a blocking send, or recv, first meet here: post isend/irecv or "
                               "batch_isend_irecv, then wait)", after));
    C10_THROW_ERROR(DistBackendError,
                    c10::str("tpu_dist: ", what_, ": the ranks called it with different tensors or arguments ",
                             "(shapes, dtypes, reduce op or root differ), so it was not run: rank ", other,
                             " called another collective than this rank ", mine, after));
  }

 private:
  std::string what_;
  int rank_;
  hlo::ElementType e_;
  int64_t out_n_, program_;
  std::vector<int> ranks_;
};

bool dense(const at::Tensor& t) {
  auto& sb = device::storage_buffer(t.storage());
  return t.is_contiguous() && t.storage_offset() == 0 && device::storage_numel(t) == t.numel() &&
         (!sb.buffer || sb.dtype == t.scalar_type());
}

// The tensor's elements as one 1-D device buffer of its dtype.
BufferRef elements(const at::Tensor& t_in) {
  at::Tensor t = dense(t_in) ? t_in : t_in.clone(at::MemoryFormat::Contiguous);
  if (!dense(t)) {  // a clone that reinterprets: copy through a fresh tensor
    at::Tensor fresh = exec::empty_tensor(t.sizes(), t.scalar_type(), t.device().index());
    fresh.copy_(t);
    t = fresh;
  }
  auto& sb = device::storage_buffer(t.storage());
  hlo::TensorType type{lowering::element_type(t.scalar_type()), {t.numel()}};
  if (!sb.buffer) {  // never written: zeros
    at::Tensor zeros = at::zeros({t.numel()}, t.options().device(at::kCPU));
    return runtime::get().to_device(zeros.const_data_ptr(), type, t.device().index());
  }
  return runtime::resolve_buffer(sb.buffer);
}

// Where a collective's result is written (programs.h, with_result_donor):
// XLA:CPU would write it into fresh memory and fault in every page of it on
// each call, which costed more than the transfer itself (docs/design.md,
// "Distributed: where the time goes").
struct Into {
  enum Kind { kFresh, kDonor } kind = kFresh;
  BufferRef donor;  // kDonor: a buffer of the result's type, given up
};

// Below this, a fresh result costs a few page faults, not worth a program variant.
bool worth_donating(int64_t numel, hlo::ElementType e) {
  return numel * hlo::element_bits(e) / 8 >= runtime::kMinDonatedBytes;
}

// Whether `real` (the buffer behind dense `t`'s storage, held once by the
// caller) is held by that storage alone, so giving it up loses nothing: a
// deferred op, a pending trace or another storage reading it holds it too.
bool sole_owner(const at::Tensor& t, const BufferRef& real) {
  const BufferRef& held = device::storage_buffer(t.storage()).buffer;
  if (!held || !real) return false;
  if (held.get() == real.get()) return real.use_count() == 2;
  return held.use_count() == 1 && real.use_count() == 2;  // held is the lazy buffer wrapping real
}

// A recycled buffer of the result's type for the result, when there is
// one. Not the input's own buffer even when the result replaces it: XLA:CPU
// does not all-reduce in place, it copies the input through a fresh
// temporary first (measured), so the input's buffer is worth more to the
// recycler, where the next call of the same size takes it.
Into recycled(hlo::ElementType e, int64_t out_n, int device) {
  Into into;
  if (!worth_donating(out_n, e)) return into;
  if ((into.donor = runtime::take_recycled(hlo::TensorType{e, {out_n}}, device))) into.kind = Into::kDonor;
  return into;
}

// The memory of `dst` (whose elements the result replaces) when nobody
// else holds it and it is already computed, else a recycled buffer.
Into donor_from(const at::Tensor& dst, hlo::ElementType e, int64_t out_n) {
  Into into;
  if (!worth_donating(out_n, e)) return into;
  hlo::TensorType type{e, {out_n}};
  const BufferRef& held = device::storage_buffer(dst.storage()).buffer;
  if (held && held->type() == type && held.use_count() == 1 && dense(dst) &&
      lowering::element_type(dst.scalar_type()) == e && runtime::buffer_ready(held)) {
    BufferRef real = runtime::resolve_buffer(held);  // a lazy buffer's real one (computed)
    if (real && real->type() == type && sole_owner(dst, real)) {
      into.kind = Into::kDonor;
      into.donor = std::move(real);
      return into;
    }
  }
  return recycled(e, out_n, dst.device().index());
}

// A new tpu tensor of `sizes` whose elements are `buf`.
at::Tensor wrap(const BufferRef& buf, at::IntArrayRef sizes, at::ScalarType dtype, int device) {
  at::Tensor t = exec::empty_tensor(sizes, dtype, static_cast<c10::DeviceIndex>(device));
  auto& sb = device::storage_buffer(t.storage());
  sb.buffer = buf;
  sb.dtype = dtype;
  return t;
}

// Writes `buf` (dst's elements in order) into dst.
void write(at::Tensor& dst, const BufferRef& buf) {
  if (dense(dst)) {
    auto& sb = device::storage_buffer(dst.storage());
    sb.buffer = buf;
    sb.dtype = dst.scalar_type();
    return;
  }
  dst.copy_(wrap(buf, dst.sizes(), dst.scalar_type(), dst.device().index()));
}

Reduce reduce_kind(const c10d::ReduceOp& op, at::ScalarType dtype, bool& avg, const char* what) {
  avg = false;
  bool integral = at::isIntegralType(dtype, /*includeBool=*/true);
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return Reduce::kSum;
    case c10d::ReduceOp::AVG: avg = true; return Reduce::kSum;
    case c10d::ReduceOp::PRODUCT: return Reduce::kProd;
    case c10d::ReduceOp::MIN: return Reduce::kMin;
    case c10d::ReduceOp::MAX: return Reduce::kMax;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(integral, "tpu_dist: ", what, ": bitwise reduction on a ", dtype, " tensor (integers and bool only)");
      return op.op_ == c10d::ReduceOp::BAND ? Reduce::kBand : op.op_ == c10d::ReduceOp::BOR ? Reduce::kBor : Reduce::kBxor;
    default:
      TORCH_CHECK(false, "tpu_dist: ", what, ": reduce op ", static_cast<int>(op.op_), " is not supported");
  }
}

// Bool rides as uint8: SUM and MAX are OR, PRODUCT and MIN are AND.
Reduce bool_reduce(Reduce r) {
  switch (r) {
    case Reduce::kSum: case Reduce::kMax: case Reduce::kBor: return Reduce::kMax;
    case Reduce::kProd: case Reduce::kMin: case Reduce::kBand: return Reduce::kMin;
    case Reduce::kBxor: return Reduce::kBxor;
  }
  return r;
}

class TpuDistBackend final : public c10d::Backend {
 public:
  TpuDistBackend(int rank, int size, std::vector<int64_t> global_ranks, std::chrono::milliseconds timeout,
                 std::string group_name)
      : Backend(rank, size), timeout_(timeout), group_name_(std::move(group_name)) {
    if (global_ranks.empty())
      for (int i = 0; i < size; ++i) global_ranks.push_back(i);
    TORCH_CHECK(static_cast<int>(global_ranks.size()) == size, "tpu_dist: group of ", size, " ranks given ",
                global_ranks.size(), " global ranks");
    const auto& job = runtime::job();
    TORCH_CHECK(size == 1 || job.active, "tpu_dist: a group of ", size, " ranks needs a job of processes; this ",
                "process runs alone (set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as torchrun does, before ",
                "the first tpu use)");
    for (int64_t g : global_ranks) {
      TORCH_CHECK(g >= 0 && g < std::max(job.world, 1), "tpu_dist: global rank ", g, " outside the job of ",
                  job.world, " processes");
      device_ids_.push_back(size == 1 ? 0 : runtime::process_device_id(static_cast<int>(g)));
    }
    global_ranks_ = std::move(global_ranks);
  }

  const std::string getBackendName() const override { return "tpu_dist"; }
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    return reduce_each(tensors, opts.reduceOp, -1, c10d::OpType::ALLREDUCE, "allreduce");
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    return allreduce(tensors, opts);
  }

  // XLA has no reduce-to-root collective: every rank gets the all-reduce,
  // only the root keeps it.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    return reduce_each(tensors, opts.reduceOp, static_cast<int>(opts.rootRank), c10d::OpType::REDUCE, "reduce");
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    std::vector<BufferRef> pending;
    for (auto& t : tensors) {
      check(t, "broadcast");
      at::Tensor x = t.scalar_type() == at::kBool ? t.to(at::kByte) : t;
      auto e = lowering::element_type(x.scalar_type());
      auto out = run("broadcast", broadcast_program(e, x.numel(), opts.rootRank, getSize()), elements(x), e,
                     x.numel(), recycled(e, x.numel(), x.device().index()));
      write_back(t, x, out);
      pending.push_back(out);
    }
    return work(c10d::OpType::BROADCAST, "broadcast", pending, tensors);
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "tpu_dist: allgather: ", outputs.size(), " output lists for ",
                inputs.size(), " inputs");
    std::vector<BufferRef> pending;
    std::vector<at::Tensor> results;
    for (size_t k = 0; k < inputs.size(); ++k) {
      auto& in = inputs[k];
      check(in, "allgather");
      check_list(outputs[k], in, "allgather");
      at::Tensor flat = gather_all(in, "allgather", pending);
      int64_t n = in.numel();
      for (int i = 0; i < getSize(); ++i) {
        outputs[k][i].copy_(flat.narrow(0, i * n, n).view(in.sizes()));
        results.push_back(outputs[k][i]);
      }
    }
    return work(c10d::OpType::ALLGATHER, "allgather", pending, results);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions&) override {
    check(input, "_allgather_base");
    check(output, "_allgather_base");
    check_base(output, input, "_allgather_base", "output", output.numel() == input.numel() * getSize());
    std::vector<BufferRef> pending;
    gather_into(output, input, "_allgather_base", pending);
    return work(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", pending, {output});
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions&) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "tpu_dist: allgather_into_tensor_coalesced: ", outputs.size(),
                " outputs for ", inputs.size(), " inputs");
    std::vector<BufferRef> pending;
    for (size_t k = 0; k < inputs.size(); ++k) {
      check(inputs[k], "allgather_into_tensor_coalesced");
      check_base(outputs[k], inputs[k], "allgather_into_tensor_coalesced", "output",
                 outputs[k].numel() == inputs[k].numel() * getSize());
      gather_into(outputs[k], inputs[k], "allgather_into_tensor_coalesced", pending);
    }
    return work(c10d::OpType::COALESCED, "allgather_into_tensor_coalesced", pending, outputs);
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    TORCH_CHECK(inputs.size() == 1, "tpu_dist: gather takes one input tensor, got ", inputs.size());
    auto& in = inputs[0];
    check(in, "gather");
    bool root = getRank() == opts.rootRank;
    if (root) {
      TORCH_CHECK(outputs.size() == 1, "tpu_dist: gather: root needs one output list");
      check_list(outputs[0], in, "gather");
    }
    std::vector<BufferRef> pending;
    at::Tensor flat = gather_all(in, "gather", pending);
    std::vector<at::Tensor> results;
    if (root) {
      int64_t n = in.numel();
      for (int i = 0; i < getSize(); ++i) {
        outputs[0][i].copy_(flat.narrow(0, i * n, n).view(in.sizes()));
        results.push_back(outputs[0][i]);
      }
    }
    return work(c10d::OpType::GATHER, "gather", pending, results);
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == 1, "tpu_dist: scatter takes one output tensor, got ", outputs.size());
    auto& out = outputs[0];
    check(out, "scatter");
    at::Tensor x = out.scalar_type() == at::kBool ? out.to(at::kByte) : out;
    int64_t n = out.numel();
    at::Tensor send;
    if (getRank() == opts.rootRank) {
      TORCH_CHECK(inputs.size() == 1, "tpu_dist: scatter: root needs one input list");
      check_list(inputs[0], out, "scatter");
      std::vector<at::Tensor> flat;
      for (auto& t : inputs[0]) flat.push_back(t.reshape({-1}).to(x.scalar_type()));
      send = at::cat(flat);
    } else {
      send = exec::empty_tensor({n * getSize()}, x.scalar_type(), out.device().index());  // reads as zeros
    }
    auto e = lowering::element_type(x.scalar_type());
    auto res = run("scatter", scatter_program(e, n, opts.rootRank, getSize()), elements(send), e, n);
    write_back(out, x, res);
    return work(c10d::OpType::SCATTER, "scatter", {res}, outputs);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "tpu_dist: reduce_scatter: ", outputs.size(), " outputs for ",
                inputs.size(), " input lists");
    std::vector<BufferRef> pending;
    for (size_t k = 0; k < outputs.size(); ++k) {
      check(outputs[k], "reduce_scatter");
      check_list(inputs[k], outputs[k], "reduce_scatter");
      std::vector<at::Tensor> flat;
      for (auto& t : inputs[k]) flat.push_back(t.reshape({-1}));
      at::Tensor in = at::cat(flat);
      scatter_into(outputs[k], in, opts, "reduce_scatter", pending);
    }
    return work(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", pending, outputs);
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    check(input, "_reduce_scatter_base");
    check(output, "_reduce_scatter_base");
    check_base(input, output, "_reduce_scatter_base", "input", input.numel() == output.numel() * getSize());
    std::vector<BufferRef> pending;
    scatter_into(output, input, opts, "_reduce_scatter_base", pending);
    return work(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", pending, {output});
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "tpu_dist: reduce_scatter_tensor_coalesced: ", outputs.size(),
                " outputs for ", inputs.size(), " inputs");
    std::vector<BufferRef> pending;
    for (size_t k = 0; k < inputs.size(); ++k) {
      check(inputs[k], "reduce_scatter_tensor_coalesced");
      check_base(inputs[k], outputs[k], "reduce_scatter_tensor_coalesced", "input",
                 inputs[k].numel() == outputs[k].numel() * getSize());
      scatter_into(outputs[k], inputs[k], opts, "reduce_scatter_tensor_coalesced", pending);
    }
    return work(c10d::OpType::COALESCED, "reduce_scatter_tensor_coalesced", pending, outputs);
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions&) override {
    check(input, "alltoall_base");
    check(output, "alltoall_base");
    TORCH_CHECK(input.scalar_type() == output.scalar_type(), "tpu_dist: alltoall_base: input is ", input.scalar_type(),
                ", output ", output.scalar_type());
    int W = getSize();
    int64_t row_in = input.dim() ? input.numel() / std::max<int64_t>(input.size(0), 1) : 1;
    int64_t row_out = output.dim() ? output.numel() / std::max<int64_t>(output.size(0), 1) : 1;
    auto counts = [&](const std::vector<int64_t>& splits, const at::Tensor& t, int64_t row, const char* which) {
      std::vector<int64_t> c;
      if (splits.empty()) {
        TORCH_CHECK(t.dim() > 0 && t.size(0) % W == 0, "tpu_dist: alltoall_base: ", which, " of shape ", t.sizes(),
                    " does not split evenly into ", W, " ranks");
        for (int i = 0; i < W; ++i) c.push_back(t.numel() / W);
      } else {
        TORCH_CHECK(static_cast<int>(splits.size()) == W, "tpu_dist: alltoall_base: ", splits.size(), " ", which,
                    " split sizes for ", W, " ranks");
        int64_t total = 0;
        for (int64_t s : splits) {
          c.push_back(s * row);
          total += s;
        }
        TORCH_CHECK(total == (t.dim() ? t.size(0) : 1), "tpu_dist: alltoall_base: ", which, " split sizes sum to ",
                    total, " but its first dimension is ", t.size(0));
      }
      return c;
    };
    auto in_counts = counts(input_splits, input, row_in, "input");
    auto out_counts = counts(output_splits, output, row_out, "output");
    std::vector<BufferRef> pending;
    at::Tensor flat = all_to_all_flat(input.reshape({-1}), in_counts, out_counts, "alltoall_base", pending);
    output.copy_(flat.view(output.sizes()));
    return work(c10d::OpType::ALLTOALL_BASE, "alltoall_base", pending, {output});
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions&) override {
    int W = getSize();
    TORCH_CHECK(static_cast<int>(outputs.size()) == W && static_cast<int>(inputs.size()) == W,
                "tpu_dist: alltoall needs ", W, " input and output tensors, got ", inputs.size(), " and ",
                outputs.size());
    std::vector<int64_t> in_counts, out_counts;
    std::vector<at::Tensor> flat_in;
    for (int i = 0; i < W; ++i) {
      check(inputs[i], "alltoall");
      check(outputs[i], "alltoall");
      TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                      outputs[i].scalar_type() == inputs[0].scalar_type(),
                  "tpu_dist: alltoall: tensors of different dtypes");
      in_counts.push_back(inputs[i].numel());
      out_counts.push_back(outputs[i].numel());
      flat_in.push_back(inputs[i].reshape({-1}));
    }
    std::vector<BufferRef> pending;
    at::Tensor flat = all_to_all_flat(at::cat(flat_in), in_counts, out_counts, "alltoall", pending);
    int64_t off = 0;
    for (int i = 0; i < W; ++i) {
      outputs[i].copy_(flat.narrow(0, off, out_counts[i]).view(outputs[i].sizes()));
      off += out_counts[i];
    }
    return work(c10d::OpType::ALLTOALL, "alltoall", pending, outputs);
  }

  // Point-to-point: posted, run at the next flush (p2p_queue.h). Tags are
  // ignored (as NCCL does): the transfers between two ranks pair up in
  // posting order.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    TORCH_CHECK(tensors.size() == 1, "tpu_dist: send takes one tensor");
    check(tensors[0], "send");
    check_peer(dst, "send");
    at::Tensor x = tensors[0].scalar_type() == at::kBool ? tensors[0].to(at::kByte) : tensors[0];
    auto e = lowering::element_type(x.scalar_type());
    int64_t n = x.numel();
    // the elements as posted: a write to the tensor before the flush does not reach the peer
    BufferRef data = elements(x);
    std::string what = "send to rank " + std::to_string(dst);
    auto t = transfer(what, dst, true);
    auto self = c10::intrusive_ptr<TpuDistBackend>::reclaim_copy(this);
    int device = x.device().index();
    t->run = [self, what, dst, e, n, data, device]() {
      return self->run_transfer(what, dst, true, data, e, n, recycled(e, n, device));
    };
    p2p::post(t);
    return work(c10d::OpType::SEND, what, {}, tensors, {t});
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    TORCH_CHECK(tensors.size() == 1, "tpu_dist: recv takes one tensor");
    at::Tensor t = tensors[0];
    check(t, "recv");
    check_peer(src, "recv");
    at::Tensor x = t.scalar_type() == at::kBool ? t.to(at::kByte) : t;
    auto e = lowering::element_type(x.scalar_type());
    int64_t n = x.numel();
    std::string what = "recv from rank " + std::to_string(src);
    auto tr = transfer(what, src, false);
    auto self = c10::intrusive_ptr<TpuDistBackend>::reclaim_copy(this);
    tr->run = [self, what, src, t, x, e, n]() mutable {
      // The program's operand on this side is not read, but it is what the
      // tensor keeps where the ranks' transfers do not pair up: its elements,
      // or any buffer of the type when it was never written (torch.empty).
      BufferRef arg = device::storage_buffer(x.storage()).buffer
                          ? elements(x)
                          : runtime::recycled_or_new(hlo::TensorType{e, {n}}, x.device().index());
      auto out = self->run_transfer(what, src, false, std::move(arg), e, n, recycled(e, n, x.device().index()));
      self->write_back(t, x, out);
      return out;
    };
    p2p::post(tr);
    return work(c10d::OpType::RECV, what, {}, tensors, {tr});
  }

  // destroy_process_group: transfers posted and never waited for still run
  // (as NCCL's would reach the peer); their errors stay with their Works.
  void shutdown() override { p2p::flush(); }

  // batch_isend_irecv (torch's _coalescing_manager): the ops posted between
  // start and end are answered by one Work (sends and recvs are posted
  // anyway; collectives run meanwhile are in it too).
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override {
    TORCH_CHECK(!coalescing_, "tpu_dist: startCoalescing while a coalesced batch is open on ", describe("the group"));
    coalescing_ = true;
    coalesced_ = {};
  }
  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    TORCH_CHECK(coalescing_, "tpu_dist: endCoalescing without startCoalescing on ", describe("the group"));
    coalescing_ = false;
    Coalesced c = std::move(coalesced_);
    coalesced_ = {};
    return c10::make_intrusive<TpuWork>(c10d::OpType::COALESCED, describe("coalesced batch (batch_isend_irecv)"),
                                        std::move(c.pending), std::move(c.results), timeout_,
                                        std::move(c.transfers));
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    // A one-element all-reduce: XLA runs it after everything queued before
    // on this device, and it finishes only when every rank has reached it.
    at::Tensor one = exec::empty_tensor({1}, at::kInt, 0);
    auto out = run("barrier", all_reduce_program(hlo::ElementType::kI32, 1, Reduce::kSum, false, getSize()),
                   elements(one), hlo::ElementType::kI32, 1);
    return work(c10d::OpType::BARRIER, "barrier", {out}, {});
  }

 private:
  std::string describe(const std::string& what) const {
    return what + " on group " + (group_name_.empty() ? "(default)" : group_name_) + " (rank " +
           std::to_string(getRank()) + " of " + std::to_string(getSize()) + ")";
  }

  c10::intrusive_ptr<c10d::Work> work(c10d::OpType type, const std::string& what, std::vector<BufferRef> pending,
                                      std::vector<at::Tensor> results, std::vector<p2p::TransferRef> transfers = {}) {
    if (coalescing_) {
      coalesced_.pending.insert(coalesced_.pending.end(), pending.begin(), pending.end());
      coalesced_.results.insert(coalesced_.results.end(), results.begin(), results.end());
      coalesced_.transfers.insert(coalesced_.transfers.end(), transfers.begin(), transfers.end());
    }
    return c10::make_intrusive<TpuWork>(type, describe(what), std::move(pending), std::move(results), timeout_,
                                        std::move(transfers));
  }

  // A transfer between this rank and group rank `peer`, in the queue's
  // order of job ranks (p2p_queue.h).
  p2p::TransferRef transfer(const std::string& what, int peer, bool sending) const {
    auto t = std::make_shared<p2p::Transfer>();
    t->what = describe(what);
    int64_t me = global_ranks_[getRank()], other = global_ranks_[peer];
    t->lo = std::min(me, other);
    t->hi = std::max(me, other);
    t->upward = (sending ? me : other) == t->lo;
    return t;
  }

  // A transfer's program: over the pair's devices, lower job rank first,
  // whichever way the elements go, so that every program between two ranks
  // has the same replicas and their rank checks meet: a send that meets
  // another program than its recv (of another size or dtype, or the peer's
  // own send) raises on both ranks instead of waiting.
  BufferRef run_transfer(const std::string& what, int peer, bool sending, BufferRef arg, hlo::ElementType e,
                         int64_t n, Into into) {
    int me = getRank();
    bool lower = global_ranks_[me] < global_ranks_[peer];
    std::vector<int64_t> devices = lower ? std::vector<int64_t>{device_ids_[me], device_ids_[peer]}
                                         : std::vector<int64_t>{device_ids_[peer], device_ids_[me]};
    std::vector<int> ranks = lower ? std::vector<int>{me, peer} : std::vector<int>{peer, me};
    return run_on(what, send_program(e, n, sending == lower ? 0 : 1), devices, std::move(arg), e, n, std::move(into),
                  std::move(ranks));
  }

  void check(const at::Tensor& t, const char* what) const {
    TORCH_CHECK(t.defined() && t.device().type() == c10::DeviceType::PrivateUse1, "tpu_dist: ", what,
                " takes tpu tensors, got a tensor on ", t.defined() ? t.device().str() : std::string("(undefined)"),
                " (use a \"cpu:gloo,tpu:tpu_dist\" group for cpu tensors)");
    TORCH_CHECK(!t.is_complex(), "tpu_dist: ", what, ": complex tensors are not supported (",
                t.scalar_type(), "); pass torch.view_as_real(t)");
  }
  void check_list(const std::vector<at::Tensor>& list, const at::Tensor& like, const char* what) const {
    TORCH_CHECK(static_cast<int>(list.size()) == getSize(), "tpu_dist: ", what, ": the list has ", list.size(),
                " tensors for a group of ", getSize());
    for (const auto& t : list) {
      check(t, what);
      TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), "tpu_dist: ", what,
                  ": list tensor ", t.sizes(), " ", t.scalar_type(), " does not match ", like.sizes(), " ",
                  like.scalar_type());
    }
  }
  void check_base(const at::Tensor& big, const at::Tensor& small, const char* what, const char* which, bool ok) const {
    TORCH_CHECK(big.scalar_type() == small.scalar_type(), "tpu_dist: ", what, ": output is ", big.scalar_type(),
                " but input ", small.scalar_type());
    TORCH_CHECK(ok, "tpu_dist: ", what, ": ", which, " of shape ", big.sizes(), " must hold ", getSize(),
                " times the elements of shape ", small.sizes());
  }
  void check_peer(int peer, const char* what) const {
    TORCH_CHECK(peer >= 0 && peer < getSize() && peer != getRank(), "tpu_dist: ", what, ": invalid peer rank ", peer,
                " (this is rank ", getRank(), " of ", getSize(), ")");
  }

  // All-reduces each tensor; root < 0: every rank keeps the result.
  c10::intrusive_ptr<c10d::Work> reduce_each(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op, int root,
                                             c10d::OpType type, const char* what) {
    std::vector<BufferRef> pending;
    for (auto& t : tensors) {
      check(t, what);
      bool avg;
      Reduce r = reduce_kind(op, t.scalar_type(), avg, what);
      at::Tensor x = as_carried(t, r);
      auto e = lowering::element_type(x.scalar_type());
      bool keeps = root < 0 || getRank() == root;
      auto out = run(what, all_reduce_program(e, x.numel(), r, avg, getSize()), elements(x), e, x.numel(),
                     recycled(e, x.numel(), x.device().index()));
      if (keeps) write_back(t, x, out);
      pending.push_back(out);
    }
    return work(type, what, pending, tensors);
  }

  // The tensor the program carries: bool as uint8.
  at::Tensor as_carried(const at::Tensor& t, Reduce& r) const {
    if (t.scalar_type() != at::kBool) return t;
    r = bool_reduce(r);
    return t.to(at::kByte);
  }
  void write_back(at::Tensor& t, const at::Tensor& carried, const BufferRef& out) const {
    if (carried.scalar_type() == t.scalar_type()) {
      write(t, out);
    } else {
      t.copy_(wrap(out, t.sizes(), carried.scalar_type(), t.device().index()));
    }
  }

  at::Tensor gather_all(const at::Tensor& in, const char* what, std::vector<BufferRef>& pending) {
    at::Tensor x = in.scalar_type() == at::kBool ? in.to(at::kByte) : in;
    auto e = lowering::element_type(x.scalar_type());
    int64_t n = x.numel();
    auto out = run(what, all_gather_program(e, n, getSize()), elements(x), e, n * getSize(),
                   recycled(e, n * getSize(), x.device().index()));
    pending.push_back(out);
    at::Tensor flat = wrap(out, {n * getSize()}, x.scalar_type(), in.device().index());
    return in.scalar_type() == x.scalar_type() ? flat : flat.to(in.scalar_type());
  }
  void gather_into(at::Tensor& output, const at::Tensor& input, const char* what, std::vector<BufferRef>& pending) {
    at::Tensor x = input.scalar_type() == at::kBool ? input.to(at::kByte) : input;
    auto e = lowering::element_type(x.scalar_type());
    int64_t n = x.numel();
    // The input first: it may be a view of the output (FSDP2 gathers in place).
    BufferRef arg = elements(x);
    Into into = x.scalar_type() == output.scalar_type() ? donor_from(output, e, n * getSize())
                                                        : recycled(e, n * getSize(), x.device().index());
    auto out = run(what, all_gather_program(e, n, getSize()), std::move(arg), e, n * getSize(), std::move(into));
    pending.push_back(out);
    write_back(output, x, out);
  }
  void scatter_into(at::Tensor& output, const at::Tensor& input, const c10d::ReduceScatterOptions& opts,
                    const char* what, std::vector<BufferRef>& pending) {
    bool avg;
    Reduce r = reduce_kind(opts.reduceOp, input.scalar_type(), avg, what);
    at::Tensor x = as_carried(input, r);
    auto e = lowering::element_type(x.scalar_type());
    int64_t n = output.numel();
    BufferRef out;
    if (bitwise(r)) {  // reduced whole (programs.h), then this rank's block
      auto all = run(what, all_reduce_program(e, n * getSize(), r, false, getSize()), elements(x), e, n * getSize());
      at::Tensor mine = wrap(all, {n * getSize()}, x.scalar_type(), x.device().index()).narrow(0, n * getRank(), n);
      out = elements(mine);
    } else if (reduce_scatter_by_all_reduce()) {
      // the whole input all-reduced into a recycled buffer, then this rank's block
      int64_t all = n * getSize();
      auto full = run(what, all_reduce_program(e, all, r, false, getSize()), elements(x), e, all,
                      recycled(e, all, x.device().index()));
      Into into = x.scalar_type() == output.scalar_type() ? donor_from(output, e, n)
                                                          : recycled(e, n, x.device().index());
      out = run_on(what, block_program(e, n, n * getRank(), avg, getSize()), {device_ids_[getRank()]}, std::move(full),
                   e, n, std::move(into));
    } else {
      BufferRef arg = elements(x);  // first: the output may be a view of the input
      Into into = x.scalar_type() == output.scalar_type() ? donor_from(output, e, n)
                                                          : recycled(e, n, x.device().index());
      out = run(what, reduce_scatter_program(e, n, r, avg, getSize()), std::move(arg), e, n, std::move(into));
    }
    pending.push_back(out);
    at::Tensor carried_out = x.scalar_type() == output.scalar_type() ? output : output.to(x.scalar_type());
    write_back(output, carried_out, out);
  }

  // XLA:CPU's gloo reduce-scatter allocates and zeroes a scratch buffer of
  // the whole input on every call and copies through it (perf: page faults
  // and memset inside GlooCommunicator::ReduceScatter); its all-reduce into
  // a recycled buffer, then the rank's block, ran 2-5x faster at >= 1 MiB
  // (docs/design.md) although it moves twice the bytes. Elsewhere (TPU,
  // GPU) reduce-scatter is the interconnect's own. TORCH_TPU_DIST_RS=native
  // keeps XLA's reduce-scatter on XLA:CPU too.
  static bool reduce_scatter_by_all_reduce() {
    static const bool on = [] {
      const char* v = std::getenv("TORCH_TPU_DIST_RS");
      if (v && std::string(v) == "native") return false;
      return runtime::get().platform().is_cpu();
    }();
    return on;
  }

  // All-to-all of a flat input whose block for rank j has in_counts[j]
  // elements; returns the blocks received (out_counts[i] from rank i)
  // concatenated. Uneven blocks are padded to the largest block of the
  // whole exchange, which the ranks first agree on with an all-gather.
  at::Tensor all_to_all_flat(const at::Tensor& flat_in, const std::vector<int64_t>& in_counts,
                             const std::vector<int64_t>& out_counts, const char* what, std::vector<BufferRef>& pending) {
    int W = getSize();
    at::ScalarType dtype = flat_in.scalar_type();
    bool even = true;
    for (int i = 0; i < W; ++i) even = even && in_counts[i] == in_counts[0] && out_counts[i] == in_counts[0];
    int64_t c = in_counts[0];
    if (!even) {
      int64_t local = 0;
      for (int i = 0; i < W; ++i) local = std::max({local, in_counts[i], out_counts[i]});
      at::Tensor mine = at::full({1}, local, at::TensorOptions().dtype(at::kLong)).to(flat_in.device());
      at::Tensor all = gather_all(mine, what, pending).cpu();
      c = all.max().item<int64_t>();
    }
    at::Tensor x = dtype == at::kBool ? flat_in.to(at::kByte) : flat_in;
    at::Tensor padded = x;
    if (!even) {
      std::vector<at::Tensor> blocks;
      int64_t off = 0;
      for (int j = 0; j < W; ++j) {
        at::Tensor b = x.narrow(0, off, in_counts[j]);
        off += in_counts[j];
        blocks.push_back(at::constant_pad_nd(b, {0, c - in_counts[j]}, 0));
      }
      padded = at::cat(blocks);
    }
    auto e = lowering::element_type(x.scalar_type());
    auto out = run(what, all_to_all_program(e, c, W), elements(padded), e, c * W);
    pending.push_back(out);
    at::Tensor got = wrap(out, {c * W}, x.scalar_type(), flat_in.device().index());
    if (!even) {
      std::vector<at::Tensor> blocks;
      for (int i = 0; i < W; ++i) blocks.push_back(got.narrow(0, i * c, out_counts[i]));
      got = at::cat(blocks);
    }
    return dtype == at::kBool ? got.to(at::kBool) : got;
  }

  BufferRef run(const std::string& what, const std::string& text, BufferRef arg, hlo::ElementType e, int64_t out_n,
                Into into = {}) {
    return run_on(what, text, device_ids_, std::move(arg), e, out_n, std::move(into));
  }

  // A collective's program (`text`, programs.h), compiled once per variant
  // and device assignment; the variant's full text is built only then.
  // `donor`: a last parameter holds the result (with_result_donor);
  // `checked`: the rank check's flag is a second result (with_rank_check).
  struct Compiled {
    runtime::ExecutableRef exe;
    int64_t hash;  // of `text`: the rank check's signature and the program's number in its error
  };
  static const Compiled& program(const std::string& text, bool donor, bool checked,
                                 const std::vector<int64_t>& devices, hlo::ElementType e, int64_t out_n,
                                 const std::string& what) {
    std::string key = text;
    key += donor ? "|donor" : "|";
    key += checked ? "|checked" : "|";
    for (int64_t d : devices) (key += ',') += std::to_string(d);
    static auto* programs = new std::unordered_map<std::string, Compiled>();
    auto it = programs->find(key);
    if (it == programs->end()) {
      // without the donor: ranks that place the result differently agree
      int64_t hash = static_cast<int64_t>(std::hash<std::string>{}(text) >> 1);
      std::string full = donor ? with_result_donor(text, e, out_n) : text;
      std::vector<hlo::TensorType> outs{{e, {out_n}}};
      if (checked) {
        const int64_t signature[3] = {hash, static_cast<int64_t>(e), out_n};
        full = with_rank_check(full, signature, static_cast<int>(devices.size()));
        outs.push_back({hlo::ElementType::kI64, {2}});
      }
      auto exe = runtime::compile_replicated(full, devices, 0, outs, "tpu_dist " + what);
      it = programs->emplace(key, Compiled{std::move(exe), hash}).first;
    }
    return it->second;
  }

  std::vector<BufferRef> execute(const std::string& what, const runtime::ExecutableRef& exe,
                                 std::vector<BufferRef> args) {
    // XLA:CPU may run the collective within the call: a peer that died or
    // never came fails it here (after --xla_cpu_collective_timeout_seconds).
    try {
      return runtime::execute_now(*exe, args);
    } catch (const c10::Error& e) {
      runtime::note_job_failure();
      C10_THROW_ERROR(DistBackendError, c10::str("tpu_dist: ", describe(what), " failed: ", e.what_without_backtrace()));
    }
  }

  // Every rank checks, inside the collective's program, that the others
  // run the same program (programs.h, with_rank_check): ranks that called
  // the collective with other shapes, dtypes, reduce ops or roots would
  // otherwise meet in XLA's transfers with different sizes (gloo aborts the
  // process) or mix the bits of different types. The check's flag is a
  // deferred check read when the host waits (Work::wait, which a collective
  // without async_op runs at once; a sync), where it raises
  // DistBackendError. TORCH_TPU_DIST_CHECK=0 leaves it out.
  static bool rank_check_enabled() {
    static const bool enabled = [] {
      const char* v = std::getenv("TORCH_TPU_DIST_CHECK");
      return !(v && std::string(v) == "0");
    }();
    return enabled;
  }

  // Runs the collective's program now, in every eager mode, checked by
  // the ranks (which may differ in where they put the result: the check
  // hashes the program without it).
  // Posted point-to-point transfers run first (p2p_queue.h: a program of
  // any group keeps them in order; inside a flush this returns at once).
  // `ranks`: a point-to-point program's replicas' group ranks.
  BufferRef run_on(const std::string& what, const std::string& text, const std::vector<int64_t>& devices,
                   BufferRef arg, hlo::ElementType e, int64_t out_n, Into into = {}, std::vector<int> ranks = {}) {
    runtime::RuntimeLock lock;
    p2p::flush();
    std::vector<BufferRef> args{std::move(arg)};
    bool donor = into.kind == Into::kDonor;
    if (donor) {
      args.push_back(std::move(into.donor));
      runtime::note_donations(1, 0);  // counted with the fused programs' (torch_tpu.fusion_stats)
    }
    bool checked = rank_check_enabled() && devices.size() >= 2;
    const Compiled& p = program(text, donor, checked, devices, e, out_n, what);
    auto outs = execute(what, p.exe, std::move(args));
    if (checked)
      runtime::defer_check(0, outs.at(1),
                           std::make_shared<RankCheck>(describe(what), getRank(), e, out_n, p.hash, std::move(ranks)));
    return outs.at(0);
  }

  std::vector<int64_t> global_ranks_;
  std::vector<int64_t> device_ids_;  // the global device of each group rank
  // between startCoalescing and endCoalescing: what the batch's Work waits for
  struct Coalesced {
    std::vector<BufferRef> pending;
    std::vector<at::Tensor> results;
    std::vector<p2p::TransferRef> transfers;
  };
  bool coalescing_ = false;
  Coalesced coalesced_;
  std::chrono::milliseconds timeout_;
  std::string group_name_;
};

}  // namespace

c10::intrusive_ptr<c10d::Backend> make_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                               std::vector<int64_t> global_ranks, std::chrono::milliseconds timeout,
                                               std::string group_name) {
  return c10::make_intrusive<TpuDistBackend>(rank, size, std::move(global_ranks), timeout, std::move(group_name));
}

}  // namespace torch_tpu::distributed
