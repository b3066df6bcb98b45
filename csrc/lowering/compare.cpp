// Comparisons, logical and bitwise ops.
#include "lowering/elementwise_util.h"

namespace torch_tpu::lowering {

using namespace ew;

namespace {

std::vector<Value> compare_rule(LowerCtx& ctx, const char* dir) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto t = ctx.result_type({"self", "other"});
  if (std::string_view(dir) != "EQ" && std::string_view(dir) != "NE") require_real(ctx, t);
  return {hlo::compare(in(ctx, "self", t, dims), in(ctx, "other", t, dims), dir)};
}

Value truth(Value x) { return x.element() == ElementType::kPred ? x : hlo::compare(x, hlo::full_like(x, 0), "NE"); }

std::vector<Value> logical_rule(LowerCtx& ctx, const char* op) {
  auto dims = out_dims(ctx, {"self", "other"});
  Value a = truth(hlo::broadcast_to(ctx.tensor("self"), dims));
  Value b = truth(hlo::broadcast_to(ctx.tensor("other"), dims));
  return {hlo::binary(op, a, b)};
}

std::vector<Value> bitwise_rule(LowerCtx& ctx, const char* op) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto t = ctx.result_type({"self", "other"});
  TORCH_CHECK(!at::isFloatingType(t), ctx.op_name(), ": bitwise ops are not implemented for ", t);
  return {hlo::binary(op, in(ctx, "self", t, dims), in(ctx, "other", t, dims))};
}

// PyTorch's shifts: amounts < 0 or >= the bit width give 0 (left) or the
// sign fill (right; 0 for unsigned types).
std::vector<Value> shift_rule(LowerCtx& ctx, bool left) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto t = ctx.result_type({"self", "other"});
  TORCH_CHECK(at::isIntegralType(t, /*includeBool=*/false), ctx.op_name(), ": shifts are not implemented for ", t);
  Value a = in(ctx, "self", t, dims), b = in(ctx, "other", t, dims);
  int bits = hlo::element_bits(a.element());
  Value out_of_range = or_(hlo::compare(b, hlo::full_like(b, 0), "LT"), hlo::compare(b, hlo::full_like(b, bits), "GE"));
  if (left) return {hlo::select(out_of_range, hlo::full_like(a, 0), hlo::binary("shift_left", a, b))};
  if (!hlo::is_signed_int(a.element()))
    return {hlo::select(out_of_range, hlo::full_like(a, 0), hlo::binary("shift_right_logical", a, b))};
  Value sign_fill = hlo::binary("shift_right_arithmetic", a, hlo::full_like(a, bits - 1));
  return {hlo::select(out_of_range, sign_fill, hlo::binary("shift_right_arithmetic", a, b))};
}

}  // namespace

TPU_LOWERING(eq) { return compare_rule(ctx, "EQ"); }
TPU_LOWERING(ne) { return compare_rule(ctx, "NE"); }
TPU_LOWERING(lt) { return compare_rule(ctx, "LT"); }
TPU_LOWERING(le) { return compare_rule(ctx, "LE"); }
TPU_LOWERING(gt) { return compare_rule(ctx, "GT"); }
TPU_LOWERING(ge) { return compare_rule(ctx, "GE"); }

TPU_LOWERING(logical_and) { return logical_rule(ctx, "and"); }
TPU_LOWERING(logical_or) { return logical_rule(ctx, "or"); }
TPU_LOWERING(logical_xor) { return logical_rule(ctx, "xor"); }

TPU_LOWERING(bitwise_and) { return bitwise_rule(ctx, "and"); }
TPU_LOWERING(bitwise_or) { return bitwise_rule(ctx, "or"); }
TPU_LOWERING(bitwise_xor) { return bitwise_rule(ctx, "xor"); }
TPU_LOWERING_ALIAS(__and__, bitwise_and);
TPU_LOWERING_ALIAS(__or__, bitwise_or);
TPU_LOWERING_ALIAS(__xor__, bitwise_xor);

TPU_LOWERING(bitwise_left_shift) { return shift_rule(ctx, true); }
TPU_LOWERING(bitwise_right_shift) { return shift_rule(ctx, false); }
TPU_LOWERING_ALIAS(__lshift__, bitwise_left_shift);
TPU_LOWERING_ALIAS(__rshift__, bitwise_right_shift);
TPU_LOWERING_ALIAS(__ilshift__, bitwise_left_shift);
TPU_LOWERING_ALIAS(__irshift__, bitwise_right_shift);

}  // namespace torch_tpu::lowering
