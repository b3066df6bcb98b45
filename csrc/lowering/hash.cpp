// hash_tensor: an order-independent 64-bit hash of a tensor's values over
// `dim` (all dims when empty). Mode 0, the only one PyTorch has, is CPU's:
// each element widened to 64 bits (floats to double, integers sign-extended
// to int64, bool to 0/1), its bits taken as uint64 and XOR-reduced.
#include <algorithm>

#include "lowering/registry.h"

namespace torch_tpu::lowering {

TPU_LOWERING(hash_tensor) {
  int64_t mode = ctx.int_arg("mode");
  TORCH_CHECK(mode == 0, "Unknown hash_tensor mode: ", mode);
  Value x = ctx.tensor("self");
  ElementType e = x.element();
  TORCH_CHECK(!hlo::is_complex(e), "hash_tensor: complex inputs are not supported");
  Value wide = hlo::is_float(e) ? hlo::convert(x, ElementType::kF64)
               : e == ElementType::kPred || hlo::is_unsigned_int(e) ? hlo::convert(x, ElementType::kU64)
                                                                   : hlo::convert(x, ElementType::kI64);
  Value bits = hlo::bitcast_convert(wide, ElementType::kU64);
  Dims dims;
  auto raw = ctx.ints_arg("dim");
  int64_t rank = x.rank();
  if (raw.empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  } else {
    for (auto d : raw) {
      int64_t r = std::max<int64_t>(rank, 1);
      TORCH_CHECK_INDEX(d >= -r && d < r, "Dimension out of range (expected to be in range of [", -r, ", ", r - 1,
                        "], but got ", d, ")");
      if (rank > 0) dims.push_back(d < 0 ? d + r : d);
    }
    std::sort(dims.begin(), dims.end());
    dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  }
  Value zero = hlo::constant_int(ctx.b(), ElementType::kU64, 0);
  Value r = hlo::reduce_multi({bits}, {zero}, dims, [](Builder&, const std::vector<Value>& a) {
    return std::vector<Value>{hlo::binary("xor", a[0], a[1])};
  })[0];
  if (auto s = ctx.out_sizes()) r = hlo::reshape(r, *s);
  return {r};
}

}  // namespace torch_tpu::lowering
