// multinomial(self [n] or [b, n], num_samples, replacement, *, generator):
// int64 category indices drawn from (unnormalised) non-negative weights.
//   with replacement: inverse CDF: u * total searched in the running sum
//     (the first category whose running sum exceeds it; zero weights are
//     never drawn);
//   without: PyTorch's own method: the top num_samples of w / E with
//     E ~ Exponential(1) (exponential races), so draws are distinct.
// The search compares every draw with every running sum ([rows, samples,
// categories] booleans): fine for sampling-sized problems, not for millions
// of draws over millions of categories.
// Draws come from ctx.rng_key(), so they are not CPU's numbers; the
// distribution is. The weights are checked as CPU checks them (negative,
// inf or NaN weights, all-zero rows), on the device: the error is raised at
// the next synchronisation (lowering/index_check.h), never a sample from
// an invalid distribution.
#include <c10/util/Exception.h>

#include "lowering/elementwise_util.h"
#include "lowering/index_check.h"
#include "lowering/random_util.h"
#include "lowering/registry.h"
#include "lowering/sort_scan.h"

namespace torch_tpu::lowering {

namespace {

// CPU's checks and messages: one sample or none replaced checks the whole
// tensor at once, more samples with replacement check entry by entry.
void check_weights(LowerCtx& ctx, Value w, bool per_entry) {
  Value zero = hlo::zeros_like(w);
  Value neg = hlo::compare(w, zero, "LT");
  Value bad = ew::not_finite(w);
  if (per_entry) {
    check_data(ctx, neg, "invalid multinomial distribution (encountering probability entry < 0)");
    check_data(ctx, bad, "invalid multinomial distribution (encountering probability entry = infinity or NaN)");
  } else {
    check_data(ctx, hlo::binary("or", neg, bad), "probability tensor contains either `inf`, `nan` or element < 0");
  }
  Value total = hlo::reduce(w, {1}, hlo::ReduceKind::kSum);
  check_data(ctx, hlo::compare(total, hlo::zeros_like(total), per_entry ? "LE" : "EQ"),
             "invalid multinomial distribution (sum of probabilities <= 0)");
}

}  // namespace

TPU_LOWERING(multinomial) {
  const at::Tensor& self = ctx.tensor_arg("self");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(self.dim() == 1 || self.dim() == 2, "prob_dist must be 1 or 2 dim");
  int64_t k = ctx.int_arg("num_samples");
  bool replacement = ctx.bool_arg("replacement");
  int64_t n = self.size(-1), rows = self.dim() == 2 ? self.size(0) : 1;
  TORCH_CHECK(k > 0, "cannot sample n_sample <= 0 samples");
  TORCH_CHECK(n <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  TORCH_CHECK(!ctx.has("out") || ctx.tensor_arg("out").scalar_type() == at::kLong,
              "multinomial expects Long tensor out, got: ", ctx.tensor_arg("out").scalar_type());
  TORCH_CHECK(replacement || k <= n, "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  Builder& b = ctx.b();
  ElementType ce = self.scalar_type() == at::kDouble ? ElementType::kF64 : ElementType::kF32;
  auto I = ElementType::kI64;
  Value w = hlo::reshape(hlo::convert(ctx.tensor("self"), ce), {rows, n});
  Dims out_dims = self.dim() == 2 ? Dims{rows, k} : Dims{k};
  if (rows == 0) return {hlo::full(b, I, out_dims, 0)};
  check_weights(ctx, w, replacement && k > 1);
  Value idx;
  if (replacement) {
    Value zero = hlo::constant(b, ce, 0);
    Value cdf = sortscan::scan({w}, 1, {zero}, [](const std::vector<Value>& a, const std::vector<Value>& c) {
      return std::vector<Value>{hlo::add(a[0], c[0])};
    })[0];
    Value total = hlo::slice(cdf, {0, n - 1}, {rows, n});  // [rows, 1]
    Value u = uniform01(ctx.rng_key(), {rows, k}, ce);
    Value target = hlo::mul(u, hlo::broadcast_in_dim(hlo::reshape(total, {rows}), {rows, k}, {0}));
    // Count of running sums <= target: the index of the first one above it.
    Dims big = {rows, k, n};
    Value le = hlo::compare(hlo::broadcast_in_dim(cdf, big, {0, 2}), hlo::broadcast_in_dim(target, big, {0, 1}), "LE");
    idx = hlo::reduce(hlo::convert(le, I), {2}, hlo::ReduceKind::kSum);
    // Rounding at the top end (target == total) stays on the last category
    // with weight.
    idx = hlo::min(idx, hlo::full(b, I, {rows, k}, static_cast<double>(n - 1)));
    Value wsel = sortscan::take_last(hlo::broadcast_in_dim(w, big, {0, 2}), idx);
    Value last_pos = hlo::reduce(
        hlo::select(hlo::compare(w, hlo::zeros_like(w), "GT"), hlo::iota(b, I, {rows, n}, 1), hlo::full(b, I, {rows, n}, 0)),
        {1}, hlo::ReduceKind::kMax);
    idx = hlo::select(hlo::compare(wsel, hlo::zeros_like(wsel), "GT"), idx,
                      hlo::broadcast_in_dim(last_pos, {rows, k}, {0}));
  } else {
    Value u = uniform01(ctx.rng_key(), {rows, n}, ce);
    // E = -log(1 - u) in (0, inf]; w / E is the race key, larger first.
    Value e = hlo::neg(hlo::unary("log_plus_one", hlo::neg(u)));
    Value key = hlo::div(w, e);
    auto sorted = sortscan::sort_with_indices(key, 1, true);
    idx = hlo::slice(sorted.second, {0, 0}, {rows, k});
  }
  return {hlo::reshape(idx, out_dims)};
}

}  // namespace torch_tpu::lowering
