// Samplers with a data-dependent number of draws: _standard_gamma (Gamma,
// Chi2, StudentT), _sample_dirichlet (Dirichlet, Beta), poisson and
// binomial. Each
// element runs the rejection method PyTorch's CPU kernels use
// (ATen/native/Distributions.h), all elements at once: a stablehlo.while
// draws a fresh batch of uniforms for every element each round (the
// generator's state threaded through the loop) and keeps the first
// accepted value of each, until all have one. Draws are not CPU's numbers;
// the distributions are (tests/test_random_rejection.py checks moments against
// CPU's samples).
//
//   gamma(a): Marsaglia and Tsang (2000); a < 1 is boosted to a + 1 and
//     scaled by U^(1/a). CPU's inner loop (redraw x while 1 + c x <= 0) is
//     folded into the rejection: a round with 1 + c x <= 0 rejects.
//   poisson(l): l >= 10 by Hoermann's transformed rejection (PTRS, 1993),
//     l < 10 by multiplying uniforms until the product falls below e^-l.
//   binomial(n, p): with q = min(p, 1 - p) (p > 1/2 counts failures),
//     n q >= 10 by Hoermann's BTRS (1993) with CPU's Stirling-tail bound,
//     else by inversion: geometric waiting times log(U) / log(1 - q),
//     rounded up, summed until they pass n.
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>

#include "lowering/index_check.h"
#include "lowering/random_util.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

// Rounds cap the loop where a parameter accepts nothing (NaN, a negative
// concentration: CPU's loop would not end either); with valid parameters an
// element is still unaccepted after 200 rounds with probability < 0.05^200.
constexpr int64_t kMaxRounds = 200;

Value scalar_i64(Builder& b, int64_t v) { return hlo::constant_int(b, ElementType::kI64, v); }

// `rounds` uniforms in [0, 1) per element: [rounds, n] from `state`, and the
// state after them.
std::pair<Value, Value> draw(Value state, int64_t rounds, int64_t n, ElementType e) {
  auto [next, bits] = hlo::rng_bit_generator(state, {rounds, n}, e == ElementType::kF64 ? ElementType::kU64 : ElementType::kU32);
  return {next, uniform_bits_to_float(bits, e)};
}

Value row(Value u, int64_t i) {
  int64_t n = u.dim(1);
  return hlo::reshape(hlo::slice(u, {i, 0}, {i + 1, n}), {n});
}

Value k(Value like, double v) { return hlo::full_like(like, v); }

// Whether any element is still to be accepted and the round bound holds.
Value more_rounds(Value round, Value done) {
  Builder& b = round.builder();
  Value left = hlo::reduce(hlo::unary("not", done), {0}, hlo::ReduceKind::kOr);
  return hlo::binary("and", left, hlo::compare(round, scalar_i64(b, kMaxRounds), "LT"));
}

// Standard gamma samples for the flat concentrations `a` [n] of float type
// `e`, from the generator state `key`; CPU's floor at the smallest normal
// number (a sample that underflows is never 0).
Value standard_gamma(Value key, Value a) {
  Builder& b = a.builder();
  ElementType e = a.element();
  int64_t n = a.dim(0);
  auto [key1, u0] = draw(key, 1, n, e);
  Value boost = hlo::compare(a, k(a, 1.0), "LT");
  // scale = (1 - U)^(1/a) where a < 1 (1 - U in (0, 1]: never log(0))
  Value scale = hlo::select(
      boost, hlo::unary("exponential", hlo::div(hlo::unary("log", hlo::sub(k(a, 1.0), row(u0, 0))), a)), k(a, 1.0));
  Value ab = hlo::select(boost, hlo::add(a, k(a, 1.0)), a);
  Value d = hlo::sub(ab, k(a, 1.0 / 3.0));
  Value c = hlo::div(k(a, 1.0), hlo::unary("sqrt", hlo::mul(k(a, 9.0), d)));
  Value nan = k(a, std::numeric_limits<double>::quiet_NaN());
  Value done0 = hlo::full(b, ElementType::kPred, {n}, 0);
  auto out = hlo::while_loop(
      {scalar_i64(b, 0), key1, done0, nan, d, c},
      [](const std::vector<Value>& s) { return more_rounds(s[0], s[2]); },
      [e, n](const std::vector<Value>& s) {
        Value d = s[4], c = s[5];
        auto [next, u] = draw(s[1], 3, n, e);
        Value x = box_muller(row(u, 0), row(u, 1));  // N(0, 1)
        Value y = hlo::add(k(d, 1.0), hlo::mul(c, x));
        Value v = hlo::mul(hlo::mul(y, y), y);
        Value uu = hlo::sub(k(d, 1.0), row(u, 2));  // in (0, 1]
        Value xx = hlo::mul(x, x);
        Value squeeze = hlo::compare(uu, hlo::sub(k(d, 1.0), hlo::mul(k(d, 0.0331), hlo::mul(xx, xx))), "LT");
        Value logv = hlo::unary("log", hlo::select(hlo::compare(v, k(v, 0.0), "GT"), v, k(v, 1.0)));
        Value bound = hlo::add(hlo::mul(k(d, 0.5), xx), hlo::mul(d, hlo::add(hlo::sub(k(d, 1.0), v), logv)));
        Value accept = hlo::binary("and", hlo::compare(y, k(y, 0.0), "GT"),
                                   hlo::binary("or", squeeze, hlo::compare(hlo::unary("log", uu), bound, "LT")));
        Value take = hlo::binary("and", accept, hlo::unary("not", s[2]));
        Value res = hlo::select(take, hlo::mul(d, v), s[3]);
        Value one = scalar_i64(d.builder(), 1);
        return std::vector<Value>{hlo::add(s[0], one), next, hlo::binary("or", s[2], accept), res, d, c};
      });
  Value r = hlo::mul(out[3], scale);
  r = hlo::select(hlo::compare(a, k(a, 0.0), "EQ"), k(a, 0.0), r);  // CPU: gamma(0) = 0, then the floor
  double tiny = e == ElementType::kF64 ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min();
  return hlo::max(r, k(r, tiny));
}

// Poisson samples (as floats of `l`'s type) for the flat rates `l` [n].
Value poisson(Value key, Value l) {
  Builder& b = l.builder();
  ElementType e = l.element();
  int64_t n = l.dim(0);
  // PTRS constants (only used where l >= 10)
  Value big = hlo::compare(l, k(l, 10.0), "GE");
  Value lb = hlo::select(big, l, k(l, 10.0));
  Value slam = hlo::unary("sqrt", lb);
  Value bb = hlo::add(k(l, 0.931), hlo::mul(k(l, 2.53), slam));
  Value aa = hlo::add(k(l, -0.059), hlo::mul(k(l, 0.02483), bb));
  Value invalpha = hlo::add(k(l, 1.1239), hlo::div(k(l, 1.1328), hlo::sub(bb, k(l, 3.4))));
  Value vr = hlo::sub(k(l, 0.9277), hlo::div(k(l, 3.6224), hlo::sub(bb, k(l, 2.0))));
  Value enlam = hlo::unary("exponential", hlo::neg(l));
  Value done0 = hlo::compare(l, k(l, 0.0), "EQ");  // rate 0: 0
  Value zero = k(l, 0.0);
  // state: round, key, done, result, product (small rates), l, big, constants
  auto out = hlo::while_loop(
      {scalar_i64(b, 0), key, done0, zero, k(l, 1.0), l, big, aa, bb, invalpha, vr, enlam},
      [](const std::vector<Value>& s) { return more_rounds(s[0], s[2]); },
      [e, n](const std::vector<Value>& s) {
        Value done = s[2], res = s[3], prod = s[4], l = s[5], big = s[6];
        Value aa = s[7], bb = s[8], invalpha = s[9], vr = s[10], enlam = s[11];
        auto [next, u] = draw(s[1], 2, n, e);
        // small rates: one more factor; done once the product is <= e^-l
        Value p2 = hlo::mul(prod, row(u, 0));
        Value small_stop = hlo::compare(p2, enlam, "LE");
        Value small_res = hlo::select(small_stop, res, hlo::add(res, k(res, 1.0)));
        // large rates: one PTRS round
        Value U = hlo::sub(row(u, 0), k(l, 0.5)), V = row(u, 1);
        Value us = hlo::sub(k(l, 0.5), hlo::unary("abs", U));
        Value kk = hlo::unary("floor", hlo::add(hlo::mul(hlo::add(hlo::div(hlo::mul(k(l, 2.0), aa), us), bb), U),
                                                hlo::add(l, k(l, 0.43))));
        Value quick = hlo::binary("and", hlo::compare(us, k(l, 0.07), "GE"), hlo::compare(V, vr, "LE"));
        Value reject = hlo::binary("or", hlo::compare(kk, k(kk, 0.0), "LT"),
                                   hlo::binary("and", hlo::compare(us, k(l, 0.013), "LT"), hlo::compare(V, us, "GT")));
        Value kpos = hlo::max(kk, k(kk, 0.0));
        Value lhs = hlo::sub(hlo::add(hlo::unary("log", V), hlo::unary("log", invalpha)),
                             hlo::unary("log", hlo::add(hlo::div(aa, hlo::mul(us, us)), bb)));
        Value rhs = hlo::sub(hlo::sub(hlo::mul(kpos, hlo::unary("log", l)), l),
                             hlo::unary("chlo.lgamma", hlo::add(kpos, k(kpos, 1.0))));
        Value big_stop = hlo::binary(
            "or", quick, hlo::binary("and", hlo::unary("not", reject), hlo::compare(lhs, rhs, "LE")));
        Value stop = hlo::select(big, big_stop, small_stop);
        Value val = hlo::select(big, kk, small_res);
        Value open = hlo::unary("not", done);
        Value nres = hlo::select(open, val, res);
        Value nprod = hlo::select(open, p2, prod);
        Value one = scalar_i64(l.builder(), 1);
        return std::vector<Value>{hlo::add(s[0], one), next, hlo::binary("or", done, stop), nres, nprod,
                                  l, big, aa, bb, invalpha, vr, enlam};
      });
  return out[3];
}

// log(k!) - Stirling's approximation of it, (k + 1/2) log(k + 1) - (k + 1)
// + log(2 pi) / 2: from a table below 10 (computed here with lgamma), from
// the series 1/12 - 1/360 / (k+1)^2 + 1/1260 / (k+1)^4 over (k+1) above.
Value stirling_tail(Value kv) {
  Value k1 = hlo::add(kv, k(kv, 1.0));
  Value k1sq = hlo::mul(k1, k1);
  Value series = hlo::div(
      hlo::sub(k(kv, 1.0 / 12), hlo::div(hlo::sub(k(kv, 1.0 / 360), hlo::div(k(kv, 1.0 / 1260), k1sq)), k1sq)), k1);
  Value r = series;
  for (int j = 0; j <= 9; ++j) {
    double exact = std::lgamma(j + 1.0) - ((j + 0.5) * std::log(j + 1.0) - (j + 1.0) + 0.5 * std::log(2 * M_PI));
    r = hlo::select(hlo::compare(kv, k(kv, j), "EQ"), k(kv, exact), r);
  }
  return r;
}

// Binomial samples (floats of `n`'s type) for flat counts `n` and success
// probabilities `p` [m].
Value binomial(Value key, Value n, Value p) {
  Builder& b = n.builder();
  ElementType e = n.element();
  int64_t m = n.dim(0);
  Value flip = hlo::compare(p, k(p, 0.5), "GT");
  Value q = hlo::select(flip, hlo::sub(k(p, 1.0), p), p);
  Value zero_out = hlo::binary("or", hlo::compare(n, k(n, 0.0), "LE"), hlo::compare(p, k(p, 0.0), "LE"));
  Value all_out = hlo::compare(p, k(p, 1.0), "GE");
  Value trivial = hlo::binary("or", zero_out, all_out);
  // q in (0, 1/2] where it is used
  Value qs = hlo::select(trivial, k(q, 0.25), q);
  Value btrs = hlo::binary("and", hlo::unary("not", trivial), hlo::compare(hlo::mul(n, qs), k(n, 10.0), "GE"));
  // BTRS constants (CPU's names)
  Value stddev = hlo::unary("sqrt", hlo::mul(hlo::mul(n, qs), hlo::sub(k(qs, 1.0), qs)));
  Value bb = hlo::add(k(n, 1.15), hlo::mul(k(n, 2.53), stddev));
  Value aa = hlo::add(hlo::add(k(n, -0.0873), hlo::mul(k(n, 0.0248), bb)), hlo::mul(k(n, 0.01), qs));
  Value cc = hlo::add(hlo::mul(n, qs), k(n, 0.5));
  Value vr = hlo::sub(k(n, 0.92), hlo::div(k(n, 4.2), bb));
  Value rr = hlo::div(qs, hlo::sub(k(qs, 1.0), qs));
  Value alpha = hlo::mul(hlo::add(k(n, 2.83), hlo::div(k(n, 5.1), bb)), stddev);
  Value mm = hlo::unary("floor", hlo::mul(hlo::add(n, k(n, 1.0)), qs));
  // The bound's terms that do not depend on k.
  Value fixed = hlo::add(hlo::mul(hlo::add(mm, k(mm, 0.5)),
                                  hlo::unary("log", hlo::div(hlo::add(mm, k(mm, 1.0)),
                                                             hlo::mul(rr, hlo::add(hlo::sub(n, mm), k(n, 1.0)))))),
                         hlo::add(stirling_tail(mm), stirling_tail(hlo::sub(n, mm))));
  Value logq1 = hlo::unary("log_plus_one", hlo::neg(qs));  // log(1 - q) < 0
  Value zero = k(n, 0.0);
  // state: round, key, done, result, geometric sum, n, q, btrs, constants
  auto out = hlo::while_loop(
      {scalar_i64(b, 0), key, trivial, zero, zero, n, mm, btrs, aa, bb, cc, vr, rr, alpha, fixed, logq1},
      [](const std::vector<Value>& s) { return more_rounds(s[0], s[2]); },
      [e, m](const std::vector<Value>& s) {
        Value done = s[2], res = s[3], gsum = s[4], n = s[5], mm = s[6], btrs = s[7];
        Value aa = s[8], bb = s[9], cc = s[10], vr = s[11], rr = s[12], alpha = s[13], fixed = s[14], logq1 = s[15];
        auto [next, u] = draw(s[1], 2, m, e);
        // inversion: one more geometric waiting time
        Value geom = hlo::unary("ceil", hlo::div(hlo::unary("log", row(u, 0)), logq1));
        Value g2 = hlo::add(gsum, geom);
        Value inv_stop = hlo::compare(g2, n, "GT");
        Value inv_res = hlo::select(inv_stop, res, hlo::add(res, k(res, 1.0)));
        // BTRS: one round
        Value U = hlo::sub(row(u, 0), k(n, 0.5)), V = row(u, 1);
        Value us = hlo::sub(k(n, 0.5), hlo::unary("abs", U));
        Value kk = hlo::unary("floor", hlo::add(hlo::mul(hlo::add(hlo::div(hlo::mul(k(n, 2.0), aa), us), bb), U), cc));
        Value in_range = hlo::binary("and", hlo::compare(kk, k(kk, 0.0), "GE"), hlo::compare(kk, n, "LE"));
        Value quick = hlo::binary("and", hlo::compare(us, k(us, 0.07), "GE"), hlo::compare(V, vr, "LE"));
        Value kc = hlo::min(hlo::max(kk, k(kk, 0.0)), n);
        Value lv = hlo::unary("log", hlo::div(hlo::mul(V, alpha), hlo::add(hlo::div(aa, hlo::mul(us, us)), bb)));
        Value n1k = hlo::add(hlo::sub(n, kc), k(n, 1.0));
        // (n + 1) log((n - m + 1) / (n - k + 1)) as a log1p: the two logs
        // are each about n log n, too large to subtract in float32
        Value ratio_log = hlo::unary("log_plus_one", hlo::div(hlo::sub(kc, mm), n1k));
        Value bound = hlo::add(
            hlo::add(fixed, hlo::mul(hlo::add(n, k(n, 1.0)), ratio_log)),
            hlo::sub(hlo::mul(hlo::add(kc, k(kc, 0.5)), hlo::unary("log", hlo::div(hlo::mul(rr, n1k), hlo::add(kc, k(kc, 1.0))))),
                     hlo::add(stirling_tail(kc), stirling_tail(hlo::sub(n, kc)))));
        Value btrs_stop = hlo::binary("and", in_range, hlo::binary("or", quick, hlo::compare(lv, bound, "LE")));
        Value stop = hlo::select(btrs, btrs_stop, inv_stop);
        Value val = hlo::select(btrs, kk, inv_res);
        Value open = hlo::unary("not", done);
        Value one = scalar_i64(n.builder(), 1);
        return std::vector<Value>{hlo::add(s[0], one), next, hlo::binary("or", done, stop), hlo::select(open, val, res),
                                  hlo::select(open, g2, gsum), n, mm, btrs, aa, bb, cc, vr, rr, alpha, fixed, logq1};
      });
  Value r = hlo::select(flip, hlo::sub(n, out[3]), out[3]);
  r = hlo::select(zero_out, k(r, 0.0), hlo::select(all_out, n, r));
  return hlo::select(hlo::binary("or", hlo::unary("not", hlo::compare(p, p, "EQ")), hlo::unary("not", hlo::compare(n, n, "EQ"))),
                     k(r, std::numeric_limits<double>::quiet_NaN()), r);
}

// The op's float input, flat, in its compute type.
Value flat_input(LowerCtx& ctx, const char* name, ElementType ce) {
  Value x = hlo::convert(ctx.tensor(name), ce);
  return hlo::reshape(x, {x.type().numel()});
}

}  // namespace

// _standard_gamma(self, generator): Gamma(self, 1) samples.
TPU_LOWERING(_standard_gamma) {
  at::ScalarType t = ctx.dtype_of("self");
  TORCH_CHECK(at::isFloatingType(t), "_standard_gamma: expected a floating point concentration, got ", t);
  Value x = ctx.tensor("self");
  if (x.type().numel() == 0) return {x};
  Value g = standard_gamma(ctx.rng_key(), flat_input(ctx, "self", compute_float(t)));
  return {hlo::convert(hlo::reshape(g, x.dims()), x.element())};
}

// _sample_dirichlet(self, generator): gamma samples normalised along the
// last dim.
TPU_LOWERING(_sample_dirichlet) {
  at::ScalarType t = ctx.dtype_of("self");
  TORCH_CHECK(at::isFloatingType(t), "_sample_dirichlet: expected a floating point concentration, got ", t);
  Value x = ctx.tensor("self");
  if (x.type().numel() == 0) return {x};
  Value g = hlo::reshape(standard_gamma(ctx.rng_key(), flat_input(ctx, "self", compute_float(t))), x.dims());
  int64_t last = x.rank() - 1;
  Value sum = hlo::reduce(g, {last}, hlo::ReduceKind::kSum);
  Dims keep;
  for (int64_t i = 0; i < last; ++i) keep.push_back(i);
  return {hlo::convert(hlo::div(g, hlo::broadcast_in_dim(sum, x.dims(), keep)), x.element())};
}

// poisson(self, generator): Poisson(self) counts, in self's float type.
TPU_LOWERING(poisson) {
  at::ScalarType t = ctx.dtype_of("self");
  TORCH_CHECK(at::isFloatingType(t), "poisson: expected a floating point rate, got ", t);
  Value x = ctx.tensor("self");
  if (x.type().numel() == 0) return {x};
  ElementType ce = compute_float(t);
  Value l = flat_input(ctx, "self", ce);
  // CPU's check (NaN fails it too)
  check_data(ctx, hlo::unary("not", hlo::compare(l, k(l, 0.0), "GE")),
             "poisson: invalid Poisson rate, expected rate to be non-negative");
  return {hlo::convert(hlo::reshape(poisson(ctx.rng_key(), l), x.dims()), x.element())};
}

// binomial(count, prob, generator): Binomial(count, prob) counts, in
// count's float type (CPU's types: count and prob share one).
TPU_LOWERING(binomial) {
  at::ScalarType t = ctx.dtype_of("count");
  TORCH_CHECK(at::isFloatingType(t), "binomial: expected a floating point count, got ", t);
  const at::Tensor& ct = ctx.tensor_arg("count");
  const at::Tensor& pt = ctx.tensor_arg("prob");
  TORCH_CHECK(ct.sizes() == pt.sizes(), "binomial: count of shape ", ct.sizes(), " and prob of shape ", pt.sizes(),
              " must have the same shape");
  Value x = ctx.tensor("count");
  if (x.type().numel() == 0) return {x};
  ElementType ce = compute_float(t);
  Value r = binomial(ctx.rng_key(), flat_input(ctx, "count", ce), flat_input(ctx, "prob", ce));
  return {hlo::convert(hlo::reshape(r, x.dims()), x.element())};
}

}  // namespace torch_tpu::lowering
