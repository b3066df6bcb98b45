// Samplers with a data-dependent number of draws: _standard_gamma (Gamma,
// Chi2, StudentT), _sample_dirichlet (Dirichlet, Beta) and poisson. Each
// element runs the rejection method PyTorch's CPU kernels use
// (ATen/native/Distributions.h), all elements at once: a stablehlo.while
// draws a fresh batch of uniforms for every element each round (the
// generator's state threaded through the loop) and keeps the first
// accepted value of each, until all have one. Draws are not CPU's numbers;
// the distributions are (tests/test_random_gamma.py checks moments against
// CPU's samples).
//
//   gamma(a): Marsaglia and Tsang (2000); a < 1 is boosted to a + 1 and
//     scaled by U^(1/a). CPU's inner loop (redraw x while 1 + c x <= 0) is
//     folded into the rejection: a round with 1 + c x <= 0 rejects.
//   poisson(l): l >= 10 by Hoermann's transformed rejection (PTRS, 1993),
//     l < 10 by multiplying uniforms until the product falls below e^-l.
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

ElementType compute_float(at::ScalarType t) { return t == at::kDouble ? ElementType::kF64 : ElementType::kF32; }

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
        // Box-Muller: x ~ N(0, 1) from u1 in (0, 1] and u2
        Value u1 = hlo::sub(k(d, 1.0), row(u, 0));
        Value x = hlo::mul(hlo::unary("sqrt", hlo::mul(k(d, -2.0), hlo::unary("log", u1))),
                           hlo::unary("cosine", hlo::mul(k(d, 2.0 * M_PI), row(u, 1))));
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

}  // namespace torch_tpu::lowering
