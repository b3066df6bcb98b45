// Small arithmetic shorthands for the special-function lowerings
// (special.cpp, special_poly.cpp): operators on hlo::Value and doubles, so
// the Cephes-style formulas read like the scalar code they follow.
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "lowering/elementwise_util.h"

namespace torch_tpu::lowering::sp {

using namespace ew;

constexpr double kPi = 3.14159265358979323846;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline Value K(Value like, double v) { return hlo::full_like(like, v); }
inline Value operator+(Value a, Value b) { return hlo::add(a, b); }
inline Value operator-(Value a, Value b) { return hlo::sub(a, b); }
inline Value operator*(Value a, Value b) { return hlo::mul(a, b); }
inline Value operator/(Value a, Value b) { return hlo::div(a, b); }
inline Value operator-(Value a) { return hlo::neg(a); }
inline Value operator+(Value a, double b) { return a + K(a, b); }
inline Value operator-(Value a, double b) { return a - K(a, b); }
inline Value operator*(Value a, double b) { return a * K(a, b); }
inline Value operator/(Value a, double b) { return a / K(a, b); }
inline Value operator+(double a, Value b) { return K(b, a) + b; }
inline Value operator-(double a, Value b) { return K(b, a) - b; }
inline Value operator*(double a, Value b) { return K(b, a) * b; }
inline Value operator/(double a, Value b) { return K(b, a) / b; }

inline Value lt(Value a, Value b) { return hlo::compare(a, b, "LT"); }
inline Value le(Value a, Value b) { return hlo::compare(a, b, "LE"); }
inline Value gt(Value a, Value b) { return hlo::compare(a, b, "GT"); }
inline Value ge(Value a, Value b) { return hlo::compare(a, b, "GE"); }
inline Value eq(Value a, Value b) { return hlo::compare(a, b, "EQ"); }
inline Value ne(Value a, Value b) { return hlo::compare(a, b, "NE"); }
inline Value lt(Value a, double b) { return lt(a, K(a, b)); }
inline Value le(Value a, double b) { return le(a, K(a, b)); }
inline Value gt(Value a, double b) { return gt(a, K(a, b)); }
inline Value ge(Value a, double b) { return ge(a, K(a, b)); }
inline Value eq(Value a, double b) { return eq(a, K(a, b)); }
inline Value ne(Value a, double b) { return ne(a, K(a, b)); }
inline Value sel(Value p, Value a, Value b) { return hlo::select(p, a, b); }
inline Value sel(Value p, double a, Value b) { return hlo::select(p, K(b, a), b); }
inline Value sel(Value p, Value a, double b) { return hlo::select(p, a, K(a, b)); }

inline Value fabs(Value x) { return hlo::unary("abs", x); }
inline Value exp(Value x) { return hlo::unary("exponential", x); }
inline Value log(Value x) { return hlo::unary("log", x); }
inline Value log1p(Value x) { return hlo::unary("log_plus_one", x); }
inline Value sqrt(Value x) { return hlo::unary("sqrt", x); }
inline Value sin(Value x) { return hlo::unary("sine", x); }
inline Value cos(Value x) { return hlo::unary("cosine", x); }
inline Value tan(Value x) { return hlo::unary("tan", x); }
inline Value floor(Value x) { return hlo::unary("floor", x); }
inline Value pow(Value a, Value b) { return hlo::binary("power", a, b); }
inline Value acos(Value x) {  // 2 atan2(sqrt(1 - x^2), 1 + x)
  Value s = sqrt((1.0 - x) * (1.0 + x));
  return sel(eq(x, -1.0), kPi, 2.0 * hlo::binary("atan2", s, 1.0 + x));
}

// Horner evaluation of c[0] x^(N-1) + ... + c[N-1] (Cephes polevl).
template <size_t N>
Value poly(Value x, const double (&c)[N]) {
  return ew::polynomial(x, c);
}
// Cephes chbevl: Chebyshev series sum at the already-mapped argument x.
template <size_t N>
Value chbevl(Value x, const double (&c)[N]) {
  Value b0 = K(x, c[0]), b1 = K(x, 0), b2 = K(x, 0);
  for (size_t i = 1; i < N; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = x * b1 - b2 + c[i];
  }
  return 0.5 * (b0 - b2);
}

// The float type a special function computes in for these arguments:
// float32 for integers/bool/bf16/f16, float64 for float64.
inline at::ScalarType compute_type(LowerCtx& ctx, std::initializer_list<std::string_view> names) {
  return opmath(float_type(ctx.result_type(names)));
}
// A unary argument in compute type `t` (bool goes through int32, see ew::in).
inline Value arg_in(LowerCtx& ctx, std::string_view name, at::ScalarType t) {
  if (ctx.is_tensor(name) && ctx.dtype_of(name) == at::kBool)
    return hlo::convert(ctx.operand(name, at::kInt), element_type(t));
  return ctx.operand(name, t);
}

// Cephes' loops that run each element until its own test breaks out:
// a stablehlo.while over the whole tensor that stops when every element
// is done (or after `max_iter` steps). `step` maps the state to the next
// state and the elements that finish with it; a done element keeps its
// values. Elements marked in `done` from the start (those another branch
// answers) cost nothing but the vector lanes. Returns the final state and,
// last, the done mask (false where `max_iter` ran out).
using LoopStep = std::function<std::pair<std::vector<Value>, Value>(const std::vector<Value>&)>;
inline std::vector<Value> until_done(std::vector<Value> state, Value done, int64_t max_iter, const LoopStep& step) {
  Builder& b = done.builder();
  const size_t n = state.size();
  const int64_t rank = done.rank();
  Dims all(rank);
  for (int64_t i = 0; i < rank; ++i) all[i] = i;
  auto every = [&](Value d) { return rank == 0 ? d : hlo::reduce(d, all, hlo::ReduceKind::kAnd); };
  std::vector<Value> init{hlo::constant_int(b, ElementType::kI32, 0), every(done), done};
  init.insert(init.end(), state.begin(), state.end());
  auto out = hlo::while_loop(
      init,
      [&](const std::vector<Value>& s) {
        Value more = hlo::compare(s[0], hlo::constant_int(b, ElementType::kI32, max_iter), "LT");
        return and_(more, not_(s[1]));
      },
      [&](const std::vector<Value>& s) {
        std::vector<Value> cur(s.begin() + 3, s.end());
        auto [next, finished] = step(cur);
        Value d = s[2], now_done = or_(d, finished);
        std::vector<Value> r{hlo::add(s[0], hlo::constant_int(b, ElementType::kI32, 1)), every(now_done), now_done};
        for (size_t i = 0; i < n; ++i) r.push_back(sel(d, cur[i], next[i]));
        return r;
      });
  std::vector<Value> res(out.begin() + 3, out.end());
  res.push_back(out[2]);
  return res;
}

}  // namespace torch_tpu::lowering::sp
