#include "exec/export.h"

#include <c10/util/Exception.h>

#include <unordered_map>

#include "device/storage.h"
#include "hlo/embed.h"
#include "hlo/ops.h"
#include "lowering/context.h"
#include "runtime/runtime.h"

namespace torch_tpu::exec {
namespace {

using hlo::TensorType;
using hlo::Value;

int64_t host_bytes(const TensorType& t) {
  int bits = hlo::element_bits(t.element);
  return t.numel() * (bits < 8 ? 1 : bits / 8);  // numpy keeps a bool per byte
}

// The buffer's current contents as a dense constant (raw little-endian
// bytes in MLIR's hex form: exact, and 2 characters a byte).
Value constant_of(hlo::Builder& b, const runtime::BufferRef& buf, const TensorType& type) {
  if (!buf) return hlo::full(b, type.element, type.dims, 0);  // never written: zeros
  std::string bytes(static_cast<size_t>(host_bytes(type)), '\0');
  runtime::get().to_host(buf, bytes.data(), bytes.size());
  bool pred = type.element == hlo::ElementType::kPred;
  TensorType lit = pred ? TensorType{hlo::ElementType::kU8, type.dims} : type;
  static const char* hex = "0123456789ABCDEF";
  std::string attr = "value = dense<\"0x";
  attr.reserve(attr.size() + 2 * bytes.size() + 32);
  for (unsigned char c : bytes) {
    attr += hex[c >> 4];
    attr += hex[c & 15];
  }
  attr += "\"> : " + lit.str();
  Value v = b.emit("constant", {}, lit, attr);
  // i1 has no agreed byte layout in hex literals: bytes, then != 0.
  return pred ? hlo::convert(v, hlo::ElementType::kPred) : v;
}

bool contiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t expect = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] != 1 && strides[d] != expect) return false;
    expect *= sizes[d];
  }
  return true;
}

}  // namespace

std::string export_module(const GraphReplay& r, const std::vector<at::Tensor>& inputs,
                          const std::vector<bool>& is_arg) {
  TORCH_CHECK(!r.text.empty(), "torch_tpu.export: the graph ran nothing (no outputs computed on tpu?)");
  TORCH_CHECK(inputs.size() == is_arg.size() && inputs.size() == r.num_inputs,
              "torch_tpu.export: internal error: inputs do not match the capture");
  hlo::Builder b;
  std::vector<Value> args(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!is_arg[i]) continue;
    const at::Tensor& t = inputs[i];
    TORCH_CHECK(t.is_contiguous() && t.storage_offset() == 0 && device::storage_numel(t) == t.numel(),
                "torch_tpu.export: internal error: input ", i, " must own a contiguous storage");
    args[i] = b.parameter(TensorType{lowering::element_type(t.scalar_type()), t.sizes().vec()});
  }
  // Each input's storage as the flat buffer the fused program reads.
  std::unordered_map<int, Value> storages;
  auto storage_value = [&](int i) -> Value {
    auto it = storages.find(i);
    if (it != storages.end()) return it->second;
    const at::Tensor& t = inputs[i];
    const auto& sb = device::storage_buffer(t.storage());
    TensorType type = sb.buffer ? sb.buffer->type()
                                : TensorType{lowering::element_type(t.scalar_type()), {device::storage_numel(t)}};
    Value v;
    if (is_arg[i]) {
      TORCH_CHECK(type.element == args[i].element(), "torch_tpu.export: input ", i, " is stored as ",
                  type.str(), ", read as ", t.scalar_type());
      v = hlo::reshape(args[i], {t.numel()});
    } else {
      v = constant_of(b, sb.buffer, type);
    }
    storages.emplace(i, v);
    return v;
  };
  std::vector<Value> params;
  for (const auto& p : r.params) {
    switch (p.kind) {
      case GraphReplay::Param::kInput:
        params.push_back(storage_value(p.input));
        break;
      case GraphReplay::Param::kConstant:
        params.push_back(constant_of(b, p.constant, p.constant->type()));
        break;
      case GraphReplay::Param::kDonor:  // only receives a result: any contents do
        params.push_back(hlo::full(b, p.type.element, p.type.dims, 0));
        break;
      case GraphReplay::Param::kRngKey:  // an exported program draws from a fixed key
        params.push_back(hlo::full(b, hlo::ElementType::kU64, {2}, 0));
        break;
    }
  }
  std::vector<Value> results =
      hlo::call_embedded(b, hlo::embed_module(r.text, "graph_"), "torch_tpu.graph", params, r.result_types);
  std::vector<Value> outs;
  for (size_t k = 0; k < r.outputs.size(); ++k) {
    const auto& o = r.outputs[k];
    const auto& s = r.storages[o.storage];
    Value buf;
    if (s.input >= 0) {
      buf = storage_value(s.input);
    } else {
      TORCH_CHECK(s.result >= 0, "torch_tpu.export: output ", k, " was never computed");
      buf = results[s.result];
    }
    TORCH_CHECK(buf.element() == lowering::element_type(o.dtype), "torch_tpu.export: output ", k, " is stored as ",
                buf.type().str(), ", read as ", o.dtype);
    TORCH_CHECK(contiguous(o.sizes, o.strides), "torch_tpu.export: internal error: output ", k, " is not contiguous");
    int64_t n = 1;
    for (auto d : o.sizes) n *= d;
    Value flat = buf;
    if (o.offset != 0 || n != buf.dim(0)) flat = hlo::slice(buf, {o.offset}, {o.offset + n});
    outs.push_back(hlo::reshape(flat, o.sizes));
  }
  return b.module_text(outs);
}

}  // namespace torch_tpu::exec
