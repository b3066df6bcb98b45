#include "exec/region_loop.h"

#include <c10/util/Exception.h>

#include <functional>

#include "hlo/builder.h"
#include "hlo/embed.h"
#include "hlo/ops.h"

namespace torch_tpu::exec {
namespace {

using hlo::TensorType;
using hlo::Value;

std::vector<Value> parameters(hlo::Builder& b, const std::vector<TensorType>& types) {
  std::vector<Value> out;
  for (const auto& t : types) out.push_back(b.parameter(t));
  return out;
}

// The body's operands: each parameter of its module is a placeholder (the
// `index`-th loop input, `arg(index)`) or the next value read from outside.
std::vector<Value> body_operands(const runtime::RegionTrace& body, const std::function<Value(int)>& arg,
                                 std::vector<Value>::const_iterator outside) {
  std::vector<Value> ops;
  for (size_t p = 0; p < body.param_arg.size(); ++p) {
    int a = body.param_arg[p];
    // Outside values come as 1-D arrays (regions.h); a scalar operand is rank 0 in the body.
    ops.push_back(a >= 0 ? arg(a) : hlo::reshape(*outside++, body.param_types[p].dims));
  }
  return ops;
}

// The flag so far, unless it has failed already: a loop reports the first
// failure of each check, as the steps' ops run one after another would.
Value keep_first_failure(Value acc, Value step) {
  hlo::Builder& b = acc.builder();
  Value failed = hlo::compare(hlo::reshape(hlo::slice(acc, {0}, {1}), {}),
                              hlo::constant_int(b, hlo::ElementType::kI64, 0), "NE");
  return hlo::select(hlo::broadcast_in_dim(failed, acc.dims(), {}), acc, step);
}

std::vector<Value> no_failures(hlo::Builder& b, size_t n) {
  std::vector<Value> out;
  for (size_t i = 0; i < n; ++i) out.push_back(hlo::full(b, hlo::ElementType::kI64, {2}, 0));
  return out;
}

void check_carries(const runtime::RegionTrace& body, const std::vector<TensorType>& carries, const char* op) {
  TORCH_CHECK(body.result_types.size() >= carries.size(), "torch_tpu: ", op, ": the body returned ",
              body.result_types.size(), " values for ", carries.size(), " carried ones");
  for (size_t k = 0; k < carries.size(); ++k)
    TORCH_CHECK(body.result_types[k] == carries[k], "torch_tpu: ", op, ": carried value ", k, " is ",
                carries[k].str(), " but the body returns ", body.result_types[k].str());
}

}  // namespace

std::string scan_module(const runtime::RegionTrace& body, const std::vector<TensorType>& carries,
                        const std::vector<TensorType>& x_slices, const std::vector<TensorType>& additional,
                        int64_t length) {
  check_carries(body, carries, "scan");
  const size_t m = carries.size(), n = x_slices.size(), p = additional.size(), q = body.outside.size();
  const size_t f = body.checks.size();
  TORCH_CHECK(body.result_types.size() >= m + f, "torch_tpu: scan: the body returned too few values");
  const size_t r = body.result_types.size() - m - f;
  hlo::Builder b;
  std::vector<TensorType> x_types;
  for (const auto& t : x_slices) x_types.push_back(TensorType{t.element, {t.numel() * length}});
  std::vector<TensorType> outside_types;
  for (const auto& o : body.outside) outside_types.push_back(o->type());
  auto init = parameters(b, carries);
  auto xs = parameters(b, x_types);
  auto adds = parameters(b, additional);
  auto outs = parameters(b, outside_types);
  // State: step, carries, ys so far, check flags, then the loop invariants.
  std::vector<Value> state{hlo::constant_int(b, hlo::ElementType::kI64, 0)};
  state.insert(state.end(), init.begin(), init.end());
  for (size_t j = 0; j < r; ++j) {
    const TensorType& y = body.result_types[m + j];
    state.push_back(hlo::full(b, y.element, {y.numel() * length}, 0));
  }
  for (auto& v : no_failures(b, f)) state.push_back(v);
  for (auto* group : {&xs, &adds, &outs}) state.insert(state.end(), group->begin(), group->end());
  auto res = hlo::while_loop(
      state,
      [&](const std::vector<Value>& s) {
        return hlo::compare(s[0], hlo::constant_int(s[0].builder(), hlo::ElementType::kI64, length), "LT");
      },
      [&](const std::vector<Value>& s) {
        hlo::Builder& rb = s[0].builder();
        Value i = s[0];
        auto at = [&](int64_t numel) { return hlo::mul(i, hlo::constant_int(rb, hlo::ElementType::kI64, numel)); };
        const size_t f0 = 1 + m + r, x0 = f0 + f, a0 = x0 + n, o0 = a0 + p;
        auto arg = [&](int a) -> Value {
          size_t k = static_cast<size_t>(a);
          if (k < m) return s[1 + k];
          if (k < m + n) return hlo::dynamic_slice(s[x0 + k - m], {at(x_slices[k - m].numel())}, {x_slices[k - m].numel()});
          return s[a0 + k - m - n];
        };
        std::vector<Value> outside_vals(s.begin() + o0, s.begin() + o0 + q);
        auto got = hlo::call_embedded(rb, hlo::embed_module(body.text, "scan_body_"), "tpu.scan_body",
                                      body_operands(body, arg, outside_vals.cbegin()), body.result_types);
        std::vector<Value> next{hlo::add(i, hlo::constant_int(rb, hlo::ElementType::kI64, 1))};
        next.insert(next.end(), got.begin(), got.begin() + m);
        for (size_t j = 0; j < r; ++j)
          next.push_back(hlo::dynamic_update_slice(s[1 + m + j], got[m + j], {at(body.result_types[m + j].numel())}));
        for (size_t k = 0; k < f; ++k) next.push_back(keep_first_failure(s[f0 + k], got[m + r + k]));
        next.insert(next.end(), s.begin() + x0, s.end());
        return next;
      });
  std::vector<Value> results(res.begin() + 1, res.begin() + 1 + m + r + f);
  return b.module_text(results);
}

std::string while_module(const runtime::RegionTrace& cond, const runtime::RegionTrace& body,
                         const std::vector<TensorType>& carried, const std::vector<TensorType>& additional) {
  check_carries(body, carried, "while_loop");
  const size_t f = body.checks.size();
  TORCH_CHECK(body.result_types.size() == carried.size() + f, "torch_tpu: while_loop: the body returned ",
              body.result_types.size() - f, " values for ", carried.size(), " carried ones");
  TORCH_CHECK(cond.checks.empty(), "torch_tpu: while_loop: a cond_fn that checks data on the device");
  TORCH_CHECK(cond.result_types.size() == 1 && cond.result_types[0].numel() == 1 &&
                  cond.result_types[0].element == hlo::ElementType::kPred,
              "torch_tpu: while_loop: cond_fn must return a one-element bool tensor");
  const size_t m = carried.size(), p = additional.size(), qc = cond.outside.size();
  hlo::Builder b;
  std::vector<TensorType> outside_types;
  for (const auto* t : {&cond, &body})
    for (const auto& o : t->outside) outside_types.push_back(o->type());
  // State: carried, additional, outside values, then the body's check flags.
  std::vector<Value> state = parameters(b, carried);
  for (auto& v : parameters(b, additional)) state.push_back(v);
  for (auto& v : parameters(b, outside_types)) state.push_back(v);
  const size_t f0 = state.size();
  for (auto& v : no_failures(b, f)) state.push_back(v);
  // Placeholders: the carried values, then the additional ones (the state's order).
  auto arg_of = [](const std::vector<Value>& s) { return [&s](int a) -> Value { return s[a]; }; };
  auto res = hlo::while_loop(
      state,
      [&](const std::vector<Value>& s) {
        hlo::Builder& rb = s[0].builder();
        auto got = hlo::call_embedded(rb, hlo::embed_module(cond.text, "while_cond_"), "tpu.while_cond",
                                      body_operands(cond, arg_of(s), s.cbegin() + m + p), cond.result_types);
        return hlo::reshape(got[0], {});
      },
      [&](const std::vector<Value>& s) {
        hlo::Builder& rb = s[0].builder();
        auto got = hlo::call_embedded(rb, hlo::embed_module(body.text, "while_body_"), "tpu.while_body",
                                      body_operands(body, arg_of(s), s.cbegin() + m + p + qc), body.result_types);
        std::vector<Value> next(got.begin(), got.begin() + m);
        next.insert(next.end(), s.begin() + m, s.begin() + f0);
        for (size_t k = 0; k < f; ++k) next.push_back(keep_first_failure(s[f0 + k], got[m + k]));
        return next;
      });
  std::vector<Value> results(res.begin(), res.begin() + m);
  results.insert(results.end(), res.begin() + f0, res.end());
  return b.module_text(results);
}

std::string cond_module(const runtime::RegionTrace& on_true, const runtime::RegionTrace& on_false,
                        const std::vector<TensorType>& operands) {
  TORCH_CHECK(on_true.result_types == on_false.result_types,
              "torch_tpu: cond: the two branches return different shapes or dtypes");
  TORCH_CHECK(on_true.checks.empty() && on_false.checks.empty(),
              "torch_tpu: cond: a branch that checks data on the device");
  hlo::Builder b;
  Value pred = b.parameter(TensorType{hlo::ElementType::kPred, {1}});
  auto args = parameters(b, operands);
  std::vector<TensorType> outside_types;
  for (const auto* t : {&on_true, &on_false})
    for (const auto& o : t->outside) outside_types.push_back(o->type());
  auto outs = parameters(b, outside_types);
  // The branches read the operands from the enclosing function (stablehlo.if's
  // regions take no arguments).
  auto branch = [&](const runtime::RegionTrace& r, const char* prefix, const char* name,
                    std::vector<Value>::const_iterator outside) -> hlo::RegionBody {
    return [&r, &args, prefix, name, outside](hlo::Builder& rb, const std::vector<Value>&) {
      auto arg = [&args](int a) -> Value { return args[a]; };
      return hlo::call_embedded(rb, hlo::embed_module(r.text, prefix), name, body_operands(r, arg, outside),
                                r.result_types);
    };
  };
  auto res = b.emit_regions(
      "if", {hlo::reshape(pred, {})}, on_true.result_types,
      {{{}, branch(on_true, "cond_true_", "tpu.cond_true", outs.cbegin())},
       {{}, branch(on_false, "cond_false_", "tpu.cond_false", outs.cbegin() + on_true.outside.size())}});
  return b.module_text(res);
}

}  // namespace torch_tpu::exec
