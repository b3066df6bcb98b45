#include "hlo/builder.h"

#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "hlo/embed.h"

namespace torch_tpu::hlo {

namespace {
// Functions embedded into a builder's module (hlo/embed.h), by builder:
// kept beside the class so that its layout stays as it is.
struct Embedded {
  std::string callee, text;
};
std::mutex g_embedded_mu;
std::unordered_map<const Builder*, std::vector<Embedded>>& embedded() {
  static auto* m = new std::unordered_map<const Builder*, std::vector<Embedded>>();
  return *m;
}
}  // namespace

void add_function_text(Builder& b, std::string callee, std::string text) {
  std::lock_guard<std::mutex> g(g_embedded_mu);
  embedded()[&b].push_back(Embedded{std::move(callee), std::move(text)});
}

const TensorType& Value::type() const { return b_->type_of(id_); }

namespace {

// "add" -> "stablehlo.add"; a name that names its dialect ("chlo.asin": the
// complex inverse trigonometric functions, which XLA decomposes itself)
// stays as given.
std::string qualified(std::string_view op) {
  if (op.find('.') != std::string_view::npos) return std::string(op);
  return "stablehlo." + std::string(op);
}

}  // namespace

int Builder::new_value(TensorType t, std::string name) {
  types_.push_back(std::move(t));
  names_.push_back(std::move(name));
  return static_cast<int>(types_.size()) - 1;
}

Value Builder::parameter(TensorType type) {
  int id = new_value(std::move(type), "%arg" + std::to_string(params_.size()));
  params_.push_back(id);
  return Value(this, id);
}

std::string Builder::operand_list(const std::vector<Value>& v) const {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (&v[i].builder() != this) throw std::logic_error("hlo: value from another builder");
    if (i) s += ", ";
    s += names_[v[i].id()];
  }
  return s;
}

std::string Builder::type_list(const std::vector<Value>& v) const {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += types_[v[i].id()].str();
  }
  return s;
}

Value Builder::emit(std::string_view op, const std::vector<Value>& operands, TensorType result,
                    std::string_view attrs) {
  return emit_multi(op, operands, {std::move(result)}, attrs)[0];
}

namespace {

template <size_t N>
bool listed(const std::string_view (&ops)[N], std::string_view op) {
  for (std::string_view o : ops)
    if (o == op) return true;
  return false;
}

// Elementwise ops StableHLO defines for floating-point (and complex)
// operands only, and those it defines for numbers but not booleans.
bool float_only(std::string_view op) {
  static const std::string_view kOps[] = {
      "exponential", "exponential_minus_one", "log", "log_plus_one", "logistic", "tanh", "sqrt", "rsqrt",
      "cbrt", "sine", "cosine", "tan", "atan2", "floor", "ceil", "round_nearest_afz", "round_nearest_even",
      "is_finite"};
  return listed(kOps, op);
}
bool not_boolean(std::string_view op) {
  static const std::string_view kOps[] = {"negate", "subtract", "divide", "remainder", "power", "abs", "sign"};
  return listed(kOps, op);
}

// Ops StableHLO defines for real numbers only. XLA:CPU does not reject a
// complex operand of these: it crashes the process while compiling
// (remainder of complex64 segfaulted in its elemental emitter).
bool real_only(std::string_view op) {
  static const std::string_view kOps[] = {"remainder", "floor", "ceil", "round_nearest_afz", "round_nearest_even",
                                          "is_finite", "reduce_precision"};
  return listed(kOps, op);
}

// What CPU and CUDA do with 8-bit floats: store, move, select, compare,
// convert, abs and matmul; no other arithmetic (neither has a kernel).
bool float8_ok(std::string_view op) {
  static const std::string_view kOps[] = {
      "convert", "bitcast_convert", "reshape", "transpose", "broadcast_in_dim", "slice", "dynamic_slice",
      "dynamic_update_slice", "concatenate", "gather", "scatter", "pad", "select", "compare", "reverse", "abs",
      "dot_general", "optimization_barrier", "tuple", "get_tuple_element", "return", "sort", "copy"};
  return listed(kOps, op);
}

void check_element_types(std::string_view op, const std::vector<Value>& operands) {
  for (const Value& v : operands) {
    ElementType e = v.element();
    if (is_float8(e) && !float8_ok(op))
      throw UnsupportedElementType("stablehlo." + std::string(op) + " of " + element_name(e), e);
    if (is_complex(e) && real_only(op))
      throw UnsupportedElementType("stablehlo." + std::string(op) + " of " + element_name(e), e);
    if (is_float(e) || is_complex(e)) continue;
    if (float_only(op) || (e == ElementType::kPred && not_boolean(op)))
      throw UnsupportedElementType("stablehlo." + std::string(op) + " of " + element_name(e), e);
  }
}

}  // namespace

std::vector<Value> Builder::emit_multi(std::string_view op, const std::vector<Value>& operands,
                                       const std::vector<TensorType>& results,
                                       std::string_view attrs,
                                       const std::vector<TensorType>& region_args,
                                       const RegionBody& body) {
  check_element_types(op, operands);
  std::string ssa = "%" + std::to_string(next_ssa_++);
  std::string line(indent_, ' ');
  line += ssa;
  if (results.size() > 1) line += ":" + std::to_string(results.size());
  line += " = \"";
  line += qualified(op);
  line += "\"(" + operand_list(operands) + ")";
  if (body) line += " (" + region_text(region_args, body) + ")";
  if (!attrs.empty()) {
    line += " {";
    line += attrs;
    line += "}";
  }
  line += " : (" + type_list(operands) + ") -> ";
  if (results.size() == 1) {
    line += results[0].str();
  } else {
    line += "(";
    for (size_t i = 0; i < results.size(); ++i) {
      if (i) line += ", ";
      line += results[i].str();
    }
    line += ")";
  }
  line += "\n";
  body_ += line;

  std::vector<Value> out;
  out.reserve(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    std::string name = results.size() == 1 ? ssa : ssa + "#" + std::to_string(i);
    out.emplace_back(this, new_value(results[i], std::move(name)));
  }
  return out;
}

// A region's text. Its values get fresh SSA names from the same counter, so
// they never clash with the enclosing function's.
std::string Builder::region_text(const std::vector<TensorType>& region_args, const RegionBody& body) {
  std::string saved = std::move(body_);
  body_.clear();
  int saved_indent = indent_;
  indent_ += 4;
  std::vector<Value> args;
  std::string header(saved_indent + 2, ' ');
  header += "^bb0(";
  for (size_t i = 0; i < region_args.size(); ++i) {
    int id = new_value(region_args[i], "%" + std::to_string(next_ssa_++));
    args.emplace_back(this, id);
    if (i) header += ", ";
    header += names_[id] + ": " + region_args[i].str();
  }
  header += "):\n";
  std::vector<Value> yields = body(*this, args);
  std::string text = header + body_;
  text += std::string(indent_, ' ') + "\"stablehlo.return\"(" + operand_list(yields) + ") : (" + type_list(yields) +
          ") -> ()\n";
  indent_ = saved_indent;
  body_ = std::move(saved);
  return "{\n" + text + std::string(indent_, ' ') + "}";
}

std::vector<Value> Builder::emit_regions(std::string_view op, const std::vector<Value>& operands,
                                         const std::vector<TensorType>& results,
                                         const std::vector<std::pair<std::vector<TensorType>, RegionBody>>& regions) {
  std::string ssa = "%" + std::to_string(next_ssa_++);
  std::string line(indent_, ' ');
  line += ssa;
  if (results.size() > 1) line += ":" + std::to_string(results.size());
  line += " = \"";
  line += qualified(op);
  line += "\"(" + operand_list(operands) + ") (";
  for (size_t i = 0; i < regions.size(); ++i) {
    if (i) line += ", ";
    line += region_text(regions[i].first, regions[i].second);
  }
  line += ") : (" + type_list(operands) + ") -> (";
  for (size_t i = 0; i < results.size(); ++i) {
    if (i) line += ", ";
    line += results[i].str();
  }
  line += ")\n";
  body_ += line;
  std::vector<Value> out;
  for (size_t i = 0; i < results.size(); ++i) {
    std::string name = results.size() == 1 ? ssa : ssa + "#" + std::to_string(i);
    out.emplace_back(this, new_value(results[i], std::move(name)));
  }
  return out;
}

std::string Builder::module_text(const std::vector<Value>& results) const {
  std::string s = "module @torch_tpu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n";
  s += "  func.func public @main(";
  for (size_t i = 0; i < params_.size(); ++i) {
    if (i) s += ", ";
    s += names_[params_[i]] + ": " + types_[params_[i]].str();
  }
  s += ") -> (" + type_list(results) + ") {\n";
  s += body_;
  s += "    \"func.return\"(" + operand_list(results) + ") : (" + type_list(results) + ") -> ()\n";
  s += "  }\n";
  // Embedded functions follow @main (the fused runtime keeps everything
  // from @main to the module's end). The entry is consumed; one whose
  // callee the body does not name was left by an earlier builder at this
  // address that never printed (its prefixes are unique), and is dropped.
  {
    std::lock_guard<std::mutex> g(g_embedded_mu);
    auto it = embedded().find(this);
    if (it != embedded().end()) {
      for (const auto& e : it->second)
        if (body_.find("@" + e.callee) != std::string::npos) s += e.text;
      embedded().erase(it);
    }
  }
  s += "}\n";
  return s;
}

}  // namespace torch_tpu::hlo
