#include "exec/fill.h"

#include <c10/util/Exception.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e4m3fnuz.h>
#include <c10/util/Float8_e5m2.h>
#include <c10/util/Float8_e5m2fnuz.h>

#include <cstring>

#include "device/storage.h"
#include "exec/capture_notes.h"
#include "lowering/context.h"
#include "lowering/view.h"
#include "runtime/modes.h"

namespace torch_tpu::exec {
namespace {

int64_t g_host_fills = 0;  // touched with the runtime lock held

}  // namespace

FillKind fill_kind(const c10::FunctionSchema& schema) {
  if (schema.name() == "aten::zero_" && schema.overload_name().empty()) return FillKind::kZero;
  if (schema.name() == "aten::fill_" && schema.overload_name() == "Scalar") return FillKind::kScalar;
  return FillKind::kNone;
}

void scalar_bytes(const c10::Scalar& s, at::ScalarType dtype, uint8_t bytes[16]) {
  switch (dtype) {
    case at::kBool: { bool v = s.toBool(); std::memcpy(bytes, &v, 1); break; }
    case at::kByte: { auto v = static_cast<uint8_t>(s.toLong()); std::memcpy(bytes, &v, 1); break; }
    case at::kChar: { auto v = static_cast<int8_t>(s.toLong()); std::memcpy(bytes, &v, 1); break; }
    case at::kShort: { auto v = static_cast<int16_t>(s.toLong()); std::memcpy(bytes, &v, 2); break; }
    case at::kInt: { auto v = static_cast<int32_t>(s.toLong()); std::memcpy(bytes, &v, 4); break; }
    case at::kLong: { auto v = s.toLong(); std::memcpy(bytes, &v, 8); break; }
    case at::kUInt32: { auto v = static_cast<uint32_t>(s.toLong()); std::memcpy(bytes, &v, 4); break; }
    case at::kUInt64: { auto v = static_cast<uint64_t>(s.toLong()); std::memcpy(bytes, &v, 8); break; }
    case at::kHalf: { c10::Half v(static_cast<float>(s.toDouble())); std::memcpy(bytes, &v, 2); break; }
    case at::kBFloat16: { c10::BFloat16 v(static_cast<float>(s.toDouble())); std::memcpy(bytes, &v, 2); break; }
    case at::kFloat: { auto v = static_cast<float>(s.toDouble()); std::memcpy(bytes, &v, 4); break; }
    case at::kDouble: { auto v = s.toDouble(); std::memcpy(bytes, &v, 8); break; }
    case at::kComplexFloat: { auto v = s.toComplexFloat(); std::memcpy(bytes, &v, 8); break; }
    case at::kComplexDouble: { auto v = s.toComplexDouble(); std::memcpy(bytes, &v, 16); break; }
    // c10's conversions, which are CPU's cast (e4m3fn saturates).
    case at::kFloat8_e4m3fn: { c10::Float8_e4m3fn v(static_cast<float>(s.toDouble())); std::memcpy(bytes, &v, 1); break; }
    case at::kFloat8_e5m2: { c10::Float8_e5m2 v(static_cast<float>(s.toDouble())); std::memcpy(bytes, &v, 1); break; }
    case at::kFloat8_e4m3fnuz: {
      c10::Float8_e4m3fnuz v(static_cast<float>(s.toDouble()));
      std::memcpy(bytes, &v, 1);
      break;
    }
    case at::kFloat8_e5m2fnuz: {
      c10::Float8_e5m2fnuz v(static_cast<float>(s.toDouble()));
      std::memcpy(bytes, &v, 1);
      break;
    }
    default: TORCH_CHECK_NOT_IMPLEMENTED(false, "torch_tpu: scalar of dtype ", dtype, " is not supported");
  }
}

bool run_host_fill(FillKind kind, const std::vector<c10::IValue>& args, int device, torch::jit::Stack* stack) {
  if (runtime::eager_mode() == runtime::EagerMode::kFused || capture::active()) return false;
  const at::Tensor& self = args[0].toTensor();
  if (!self.is_privateuseone()) return false;  // a CPU self: the program path raises CPU's error
  const int64_t numel = device::storage_numel(self);
  // All elements get one value, so any layout covering the storage would
  // do; the program path's own test keeps the two paths' choices alike.
  if (!lowering::covers_storage(lowering::ViewLayout{self.sizes(), self.strides(), self.storage_offset()}, numel))
    return false;
  at::ScalarType dtype = self.scalar_type();
  uint8_t bytes[16] = {0};
  // The same conversion as the program's uploaded scalar operand (and the
  // value was range-checked like CPU's by check_args).
  if (kind == FillKind::kScalar) scalar_bytes(args[1].toScalar(), dtype, bytes);
  hlo::TensorType type{lowering::element_type(dtype), {numel}};
  runtime::BufferRef buf = runtime::get().filled(type, kind == FillKind::kScalar ? bytes : nullptr, device);
  auto& sb = device::storage_buffer(self.storage());
  sb.buffer = std::move(buf);
  sb.dtype = dtype;
  ++g_host_fills;
  stack->push_back(args[0]);
  return true;
}

int64_t host_fill_count() { return g_host_fills; }

}  // namespace torch_tpu::exec
