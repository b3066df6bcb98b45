// Tensor.record_stream(stream): on CUDA it tells the caching allocator that
// another stream may still read the tensor, so its block is not reused
// before that work ends. A tpu device has one in-order stream (device/
// guard.cpp) and a buffer lives while any program using it holds a
// reference, so there is nothing to record. nn.DataParallel records every
// scattered input on the current stream.
#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace torch_tpu::aten {
namespace {

void record_stream(at::Tensor& self, at::Stream stream) {
  TORCH_CHECK(stream.device_type() == self.device().type(), "record_stream: the stream is on ", stream.device(),
              ", the tensor on ", self.device());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("record_stream", TORCH_FN(record_stream)); }

}  // namespace torch_tpu::aten
