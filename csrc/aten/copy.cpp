// copy_ between tpu and host, and between tpu tensors; item().
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/conj_physical.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/neg.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "device/storage.h"
#include "device/sync_debug.h"
#include "exec/op_runner.h"
#include "lowering/context.h"
#include "lowering/view.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {
namespace {

bool covers(const at::Tensor& t) {
  return lowering::covers_storage({t.sizes(), t.strides(), t.storage_offset()}, device::storage_numel(t));
}

// tpu -> tpu on one device: the "copy" lowering (converts and broadcasts).
void copy_on_device(const at::Tensor& self, const at::Tensor& src) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
  torch::jit::Stack stack{self, src, false};
  exec::run_lowered_op(op, &stack);
}

void upload(const at::Tensor& self, const at::Tensor& src) {
  at::Tensor host = src.to(self.scalar_type()).expand(self.sizes()).contiguous();
  if (!covers(self)) {
    at::Tensor tmp = exec::empty_tensor(self.sizes(), self.scalar_type(), self.device().index());
    upload(tmp, host);
    copy_on_device(self, tmp);
    return;
  }
  auto& sb = device::storage_buffer(self.storage());
  sb.buffer = runtime::get().to_device(
      host.const_data_ptr(), hlo::TensorType{lowering::element_type(self.scalar_type()), {self.numel()}},
      self.device().index());
  sb.dtype = self.scalar_type();
}

void download(const at::Tensor& self, const at::Tensor& src, const char* what) {
  device::on_host_wait(what);
  at::Tensor dense = src;
  auto* sb = &device::storage_buffer(src.storage());
  if (!covers(src) || (sb->buffer && sb->dtype != src.scalar_type())) {
    dense = exec::empty_tensor(src.sizes(), src.scalar_type(), src.device().index());
    copy_on_device(dense, src);
    sb = &device::storage_buffer(dense.storage());
  }
  at::Tensor host = at::empty(src.sizes(), src.options().device(at::kCPU));
  if (sb->buffer)
    runtime::get().to_host(sb->buffer, host.mutable_data_ptr(), host.nbytes());
  else
    host.zero_();
  self.copy_(host);
}

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src_in, bool non_blocking) {
  if (self.is_same(src_in) || self.numel() == 0) return self;
  // CPU's and CUDA's copy_ (TensorIterator) refuse a destination that
  // writes one element twice, and a source that partly overlaps it
  // (`x[1:].copy_(x[:-1])`); here the copy would run as if the source were
  // cloned first, an answer those devices never give.
  at::assert_no_internal_overlap(self);
  if (self.is_privateuseone() && src_in.is_privateuseone()) at::assert_no_partial_overlap(self, src_in);
  // Lazy conjugate / negative views (conj(), _neg_view) hold raw values plus
  // a flag: copy their logical values.
  at::Tensor src = src_in;
  if (src.is_privateuseone() && src.is_conj()) src = at::conj_physical(src.conj());
  if (src.is_privateuseone() && src.is_neg()) src = at::neg(src._neg_view());
  if (src.is_cpu()) src = src.resolve_conj().resolve_neg();
  if (self.is_privateuseone() && src.is_privateuseone()) {
    if (self.device() == src.device()) {
      copy_on_device(self, src);
    } else {
      upload(self, src.cpu());
    }
  } else if (self.is_privateuseone()) {
    TORCH_CHECK(src.is_cpu(), "torch_tpu: cannot copy from ", src.device(), " to ", self.device());
    upload(self, src);
  } else {
    TORCH_CHECK(self.is_cpu(), "torch_tpu: cannot copy from ", src.device(), " to ", self.device());
    download(self, src, "a copy of a tpu tensor to the host");
  }
  return self;
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));  // 0-dim or one element
  download(host, self, "a tpu value read on the host (item(), or an op whose result's shape depends on the data)");
  return at::_local_scalar_dense(host);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("copy_", TORCH_FN(copy_));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

}  // namespace torch_tpu::aten
