#include "hlo/ops.h"

#include "hlo/complex_ops.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e4m3fnuz.h>
#include <c10/util/Float8_e5m2.h>
#include <c10/util/Float8_e5m2fnuz.h>
#include <c10/util/Half.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace torch_tpu::hlo {
namespace {

TensorType with_element(const TensorType& t, ElementType e) { return TensorType{e, t.dims}; }
TensorType scalar_type(ElementType e) { return TensorType{e, {}}; }

Value round_to_float8(Value x, ElementType e);  // below convert, which uses it

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("hlo: ") + what);
}

// Float literals are printed as bit patterns so that every value (inf, nan,
// denormals) round-trips exactly.
std::string float_literal(ElementType e, double v) {
  char buf[32];
  switch (e) {
    case ElementType::kF64: {
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      std::snprintf(buf, sizeof(buf), "0x%016" PRIX64, bits);
      break;
    }
    case ElementType::kF32: {
      float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      std::snprintf(buf, sizeof(buf), "0x%08" PRIX32, bits);
      break;
    }
    case ElementType::kBF16:
      std::snprintf(buf, sizeof(buf), "0x%04X", c10::BFloat16(static_cast<float>(v)).x);
      break;
    case ElementType::kF16:
      std::snprintf(buf, sizeof(buf), "0x%04X", c10::Half(static_cast<float>(v)).x);
      break;
    case ElementType::kF8E4M3FN:
      std::snprintf(buf, sizeof(buf), "0x%02X", c10::Float8_e4m3fn(static_cast<float>(v)).x);
      break;
    case ElementType::kF8E5M2:
      std::snprintf(buf, sizeof(buf), "0x%02X", c10::Float8_e5m2(static_cast<float>(v)).x);
      break;
    case ElementType::kF8E4M3FNUZ:
      std::snprintf(buf, sizeof(buf), "0x%02X", c10::Float8_e4m3fnuz(static_cast<float>(v)).x);
      break;
    case ElementType::kF8E5M2FNUZ:
      std::snprintf(buf, sizeof(buf), "0x%02X", c10::Float8_e5m2fnuz(static_cast<float>(v)).x);
      break;
    default:
      throw std::invalid_argument("hlo: not a float type");
  }
  return buf;
}

const char* compare_type(ElementType e) {
  if (is_float(e) || is_complex(e)) return "FLOAT";
  if (is_signed_int(e)) return "SIGNED";
  return "UNSIGNED";
}

Dims drop_dims(const Dims& dims, const Dims& drop) {
  Dims out;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    bool dropped = false;
    for (auto d : drop) dropped |= d == i;
    if (!dropped) out.push_back(dims[i]);
  }
  return out;
}

}  // namespace

std::string dims_attr(const Dims& d) {
  std::string s = "array<i64";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : ": ") + std::to_string(d[i]);
  return s + ">";
}

std::string dims_list(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

Value constant(Builder& b, ElementType e, double v) {
  if (is_complex(e)) return convert(constant(b, complex_component(e), v), e);  // v + 0i
  std::string lit;
  if (is_float(e)) {
    lit = float_literal(e, v);
  } else if (e == ElementType::kPred) {
    lit = v != 0 ? "true" : "false";
  } else {
    // Saturate like a C++ cast would not: out-of-range stays in range.
    if (is_unsigned_int(e)) {
      lit = std::to_string(static_cast<uint64_t>(v < 0 ? 0 : v));
    } else {
      lit = std::to_string(static_cast<int64_t>(v));
    }
  }
  auto t = scalar_type(e);
  return b.emit("constant", {}, t, "value = dense<" + lit + "> : " + t.str());
}

Value constant_int(Builder& b, ElementType e, int64_t v) {
  if (is_float(e)) return constant(b, e, static_cast<double>(v));
  if (e == ElementType::kPred) return constant(b, e, v != 0);
  auto t = scalar_type(e);
  std::string lit = is_unsigned_int(e) ? std::to_string(static_cast<uint64_t>(v)) : std::to_string(v);
  return b.emit("constant", {}, t, "value = dense<" + lit + "> : " + t.str());
}

Value lowest(Builder& b, ElementType e) {
  if (is_float(e)) return constant(b, e, -std::numeric_limits<double>::infinity());
  if (e == ElementType::kPred || is_unsigned_int(e)) return constant_int(b, e, 0);
  int bits = element_bits(e);
  return constant_int(b, e, bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (bits - 1)));
}

Value highest(Builder& b, ElementType e) {
  if (is_float(e)) return constant(b, e, std::numeric_limits<double>::infinity());
  if (e == ElementType::kPred) return constant_int(b, e, 1);
  int bits = element_bits(e);
  // constant_int prints unsigned types from the bits, so -1 is u64's all ones.
  if (is_unsigned_int(e)) return constant_int(b, e, bits == 64 ? -1 : (int64_t(1) << bits) - 1);
  return constant_int(b, e, bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << (bits - 1)) - 1);
}

Value full(Builder& b, ElementType e, const Dims& dims, double v) {
  return broadcast_in_dim(constant(b, e, v), dims, {});
}

Value zeros_like(Value x) { return full_like(x, 0); }

Value full_like(Value x, double v) { return full(x.builder(), x.element(), x.dims(), v); }

Value iota(Builder& b, ElementType e, const Dims& dims, int64_t dim) {
  return b.emit("iota", {}, TensorType{e, dims}, "iota_dimension = " + std::to_string(dim) + " : i64");
}

Value convert(Value x, ElementType e) {
  if (x.element() == e) return x;
  // PyTorch casts floats to uint8 through int64 on every device (c10's
  // static_cast_with_inter_type), so -1.7 -> 255 and 300.2 -> 44, where
  // XLA's direct convert saturates (0, 255).
  if (e == ElementType::kU8 && is_float(x.element()))
    x = x.builder().emit("convert", {x}, with_element(x.type(), ElementType::kI64));
  if (is_float8(e) && !is_complex(x.element())) x = round_to_float8(x, e);
  return x.builder().emit("convert", {x}, with_element(x.type(), e));
}

namespace {

// x (any real type) as float32 holding a value of `e`'s grid, the value
// PyTorch's cast to `e` gives, so that XLA's convert only changes the
// encoding. XLA:CPU's convert to 8-bit floats rounds twice (through f16:
// -4.7489 became -5 in e4m3fn where CPU and CUDA give -4.5), and into the
// fnuz formats it turns a negative value that rounds to zero into 0x80,
// which is their NaN. So: round to nearest even at `e`'s spacing for x's
// exponent (never finer than its subnormals); the fnuz formats' zero is
// +0; float8_e4m3fn, which has no infinity, saturates to +-448 (PyTorch's
// cast and CUDA's SATFINITE: inf and overflow included); the others
// overflow as XLA does (e5m2 to inf, fnuz to NaN). NaN stays NaN.
Value round_to_float8(Value x, ElementType e) {
  int mantissa = 3, min_exponent = -6;
  if (e == ElementType::kF8E5M2) mantissa = 2, min_exponent = -14;
  if (e == ElementType::kF8E4M3FNUZ) mantissa = 3, min_exponent = -7;
  if (e == ElementType::kF8E5M2FNUZ) mantissa = 2, min_exponent = -15;
  x = convert(x, ElementType::kF32);  // exact from 8- and 16-bit floats and small ints; f64 as CPU (via float)
  const ElementType i32 = ElementType::kI32;
  Value bits = bitcast_convert(x, i32);
  Value exponent = sub(binary("and", binary("shift_right_logical", bits, full_like(bits, 23)), full_like(bits, 255)),
                       full_like(bits, 127));
  exponent = max(exponent, full_like(exponent, min_exponent));
  Value spacing = bitcast_convert(
      binary("shift_left", add(exponent, full_like(exponent, 127 - mantissa)), full_like(exponent, 23)),
      ElementType::kF32);
  Value r = mul(unary("round_nearest_even", div(x, spacing)), spacing);  // both exact: spacing is a power of 2
  if (e == ElementType::kF8E4M3FNUZ || e == ElementType::kF8E5M2FNUZ)
    r = select(compare(r, zeros_like(r), "EQ"), zeros_like(r), r);
  if (e == ElementType::kF8E4M3FN) r = clamp(full_like(r, -448.0), r, full_like(r, 448.0));
  return r;
}

}  // namespace

Value bitcast_convert(Value x, ElementType e) {
  if (x.element() == e) return x;
  return x.builder().emit("bitcast_convert", {x}, with_element(x.type(), e));
}

Value reshape(Value x, const Dims& dims) {
  if (x.dims() == dims) return x;
  return x.builder().emit("reshape", {x}, TensorType{x.element(), dims});
}

Value transpose(Value x, const Dims& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  Dims out;
  for (auto p : perm) out.push_back(x.dim(p));
  return x.builder().emit("transpose", {x}, TensorType{x.element(), out}, "permutation = " + dims_attr(perm));
}

Value broadcast_in_dim(Value x, const Dims& dims, const Dims& broadcast_dims) {
  require(static_cast<int64_t>(broadcast_dims.size()) == x.rank(), "broadcast_in_dim rank mismatch");
  if (x.dims() == dims) return x;
  return x.builder().emit("broadcast_in_dim", {x}, TensorType{x.element(), dims},
                          "broadcast_dimensions = " + dims_attr(broadcast_dims));
}

Value broadcast_to(Value x, const Dims& dims) {
  if (x.dims() == dims) return x;
  int64_t offset = static_cast<int64_t>(dims.size()) - x.rank();
  require(offset >= 0, "broadcast_to: target has lower rank");
  // Size-1 dims that must grow are reshaped away first; broadcast_in_dim
  // then maps the rest one-to-one.
  Dims kept_dims, bdims;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (x.dim(i) == dims[offset + i]) {
      kept_dims.push_back(x.dim(i));
      bdims.push_back(offset + i);
    } else {
      require(x.dim(i) == 1, "broadcast_to: incompatible shapes");
    }
  }
  return broadcast_in_dim(reshape(x, kept_dims), dims, bdims);
}

Value slice(Value x, const Dims& start, const Dims& limit, const Dims& strides_in) {
  Dims strides = strides_in.empty() ? Dims(x.rank(), 1) : strides_in;
  Dims out;
  for (int64_t i = 0; i < x.rank(); ++i) {
    int64_t n = limit[i] > start[i] ? (limit[i] - start[i] + strides[i] - 1) / strides[i] : 0;
    out.push_back(n);
  }
  if (out == x.dims()) return x;
  return x.builder().emit("slice", {x}, TensorType{x.element(), out},
                          "start_indices = " + dims_attr(start) + ", limit_indices = " + dims_attr(limit) +
                              ", strides = " + dims_attr(strides));
}

Value concatenate(const std::vector<Value>& xs, int64_t dim) {
  require(!xs.empty(), "concatenate of nothing");
  if (xs.size() == 1) return xs[0];
  Dims out = xs[0].dims();
  out[dim] = 0;
  for (auto& x : xs) out[dim] += x.dim(dim);
  return xs[0].builder().emit("concatenate", xs, TensorType{xs[0].element(), out},
                              "dimension = " + std::to_string(dim) + " : i64");
}

Value pad(Value x, Value pad_value, const Dims& low, const Dims& high, const Dims& interior_in) {
  Dims interior = interior_in.empty() ? Dims(x.rank(), 0) : interior_in;
  Dims out;
  for (int64_t i = 0; i < x.rank(); ++i) {
    int64_t n = x.dim(i);
    out.push_back(low[i] + high[i] + n + (n > 0 ? (n - 1) * interior[i] : 0));
  }
  return x.builder().emit("pad", {x, pad_value}, TensorType{x.element(), out},
                          "edge_padding_low = " + dims_attr(low) + ", edge_padding_high = " + dims_attr(high) +
                              ", interior_padding = " + dims_attr(interior));
}

Value reverse(Value x, const Dims& dims) {
  if (dims.empty()) return x;
  return x.builder().emit("reverse", {x}, x.type(), "dimensions = " + dims_attr(dims));
}

Value dynamic_update_slice(Value x, Value update, const std::vector<Value>& starts) {
  std::vector<Value> ops{x, update};
  ops.insert(ops.end(), starts.begin(), starts.end());
  return x.builder().emit("dynamic_update_slice", ops, x.type());
}

Value dynamic_slice(Value x, const std::vector<Value>& starts, const Dims& sizes) {
  std::vector<Value> ops{x};
  ops.insert(ops.end(), starts.begin(), starts.end());
  return x.builder().emit("dynamic_slice", ops, TensorType{x.element(), sizes}, "slice_sizes = " + dims_attr(sizes));
}

Value unary(const char* op, Value x) {
  // abs of a complex value is its real modulus.
  if (is_complex(x.element()) && std::strcmp(op, "abs") == 0)
    return x.builder().emit(op, {x}, with_element(x.type(), complex_component(x.element())));
  // StableHLO's abs and sign take signed types only; on unsigned ones they
  // are the identity and (x != 0).
  if (is_unsigned_int(x.element()) && std::strcmp(op, "abs") == 0) return x;
  if (is_unsigned_int(x.element()) && std::strcmp(op, "sign") == 0)
    return convert(compare(x, zeros_like(x), "NE"), x.element());
  return x.builder().emit(op, {x}, x.type());
}

Value real(Value z) {
  if (!is_complex(z.element())) return z;
  return z.builder().emit("real", {z}, with_element(z.type(), complex_component(z.element())));
}

Value imag(Value z) {
  if (!is_complex(z.element())) return zeros_like(z);
  return z.builder().emit("imag", {z}, with_element(z.type(), complex_component(z.element())));
}

Value make_complex(Value re, Value im) {
  require(re.type() == im.type() && is_float(re.element()), "complex parts differ in type or are not f32/f64");
  ElementType ce = re.element() == ElementType::kF64 ? ElementType::kC128 : ElementType::kC64;
  return re.builder().emit("complex", {re, im}, with_element(re.type(), ce));
}

Value conj(Value z) {
  if (!is_complex(z.element())) return z;
  return make_complex(real(z), neg(imag(z)));
}

Value binary(const char* op, Value a, Value b) {
  require(a.type() == b.type(), "binary op operands differ in type");
  return a.builder().emit(op, {a, b}, a.type());
}

Value add(Value a, Value b) { return binary("add", a, b); }
Value sub(Value a, Value b) { return binary("subtract", a, b); }
Value mul(Value a, Value b) { return binary("multiply", a, b); }
Value div(Value a, Value b) { return binary("divide", a, b); }
Value max(Value a, Value b) { return binary("maximum", a, b); }
Value min(Value a, Value b) { return binary("minimum", a, b); }
Value neg(Value x) { return unary("negate", x); }

Value compare(Value a, Value b, const char* dir) {
  require(a.type() == b.type(), "compare operands differ in type");
  return a.builder().emit("compare", {a, b}, with_element(a.type(), ElementType::kPred),
                          std::string("comparison_direction = #stablehlo<comparison_direction ") + dir +
                              ">, compare_type = #stablehlo<comparison_type " + compare_type(a.element()) + ">");
}

Value select(Value pred, Value on_true, Value on_false) {
  return pred.builder().emit("select", {pred, on_true, on_false}, on_true.type());
}

Value clamp(Value lo, Value x, Value hi) { return x.builder().emit("clamp", {lo, x, hi}, x.type()); }

namespace {

const char* reduce_op(ReduceKind k, ElementType e) {
  switch (k) {
    case ReduceKind::kSum: return e == ElementType::kPred ? "or" : "add";
    case ReduceKind::kProd: return e == ElementType::kPred ? "and" : "multiply";
    case ReduceKind::kMax: return "maximum";
    case ReduceKind::kMin: return "minimum";
    case ReduceKind::kAnd: return "and";
    case ReduceKind::kOr: return "or";
  }
  return "add";
}

}  // namespace

Value reduce(Value x, const Dims& dims, ReduceKind kind) {
  if (dims.empty()) return x;
  Builder& b = x.builder();
  ElementType e = x.element();
  // A bitwise and starts from all ones (true for pred).
  Value init = kind == ReduceKind::kMax    ? lowest(b, e)
               : kind == ReduceKind::kMin  ? highest(b, e)
               : kind == ReduceKind::kAnd  ? constant_int(b, e, -1)
               : kind == ReduceKind::kProd ? constant(b, e, 1)
                                           : constant(b, e, 0);
  const char* op = reduce_op(kind, e);
  return reduce_multi({x}, {init}, dims, [op](Builder& rb, const std::vector<Value>& a) {
    return std::vector<Value>{rb.emit(op, {a[0], a[1]}, a[0].type())};
  })[0];
}

std::vector<Value> reduce_multi(const std::vector<Value>& xs, const std::vector<Value>& inits, const Dims& dims,
                                const RegionBody& body) {
  Builder& b = xs[0].builder();
  std::vector<Value> operands = xs;
  operands.insert(operands.end(), inits.begin(), inits.end());
  std::vector<TensorType> results, region_args;
  for (auto& x : xs) results.push_back(TensorType{x.element(), drop_dims(x.dims(), dims)});
  for (auto& x : xs) region_args.push_back(scalar_type(x.element()));
  for (auto& x : xs) region_args.push_back(scalar_type(x.element()));
  // Block arguments come as (acc0, acc1, ..., cur0, cur1, ...).
  return b.emit_multi("reduce", operands, results, "dimensions = " + dims_attr(dims), region_args, body);
}

Value dot_general(Value lhs, Value rhs, const DotDims& dd, ElementType result, const std::string& precision) {
  // 8-bit float products accumulate in float32 and round once, as CPU's
  // (XLA:CPU's f8 dot rounded through f16: one e4m3 step off).
  if (is_float8(lhs.element()) || is_float8(rhs.element())) {
    Value wide = dot_general(convert(lhs, ElementType::kF32), convert(rhs, ElementType::kF32), dd,
                             is_float8(result) ? ElementType::kF32 : result, precision);
    return convert(wide, result);
  }
  Dims out;
  for (auto d : dd.lhs_batch) out.push_back(lhs.dim(d));
  Dims lhs_skip = dd.lhs_batch, rhs_skip = dd.rhs_batch;
  lhs_skip.insert(lhs_skip.end(), dd.lhs_contract.begin(), dd.lhs_contract.end());
  rhs_skip.insert(rhs_skip.end(), dd.rhs_contract.begin(), dd.rhs_contract.end());
  for (auto d : drop_dims(lhs.dims(), lhs_skip)) out.push_back(d);
  for (auto d : drop_dims(rhs.dims(), rhs_skip)) out.push_back(d);
  std::string nums = "#stablehlo.dot<";
  bool first = true;
  auto field = [&](const char* name, const Dims& d) {
    if (d.empty()) return;
    nums += (first ? "" : ", ") + std::string(name) + " = " + dims_list(d);
    first = false;
  };
  field("lhs_batching_dimensions", dd.lhs_batch);
  field("rhs_batching_dimensions", dd.rhs_batch);
  field("lhs_contracting_dimensions", dd.lhs_contract);
  field("rhs_contracting_dimensions", dd.rhs_contract);
  nums += ">";
  std::string attrs = "dot_dimension_numbers = " + nums + ", precision_config = [#stablehlo<precision " + precision +
                      ">, #stablehlo<precision " + precision + ">]";
  return lhs.builder().emit("dot_general", {lhs, rhs}, TensorType{result, out}, attrs);
}

Value gather(Value operand, Value indices, const GatherDims& gd, const Dims& slice_sizes, const Dims& result_dims) {
  std::string nums = "#stablehlo.gather<";
  bool first = true;
  auto field = [&](const char* name, const Dims& d) {
    if (d.empty()) return;
    nums += (first ? "" : ", ") + std::string(name) + " = " + dims_list(d);
    first = false;
  };
  field("offset_dims", gd.offset_dims);
  field("collapsed_slice_dims", gd.collapsed_slice_dims);
  field("operand_batching_dims", gd.operand_batching_dims);
  field("start_indices_batching_dims", gd.start_indices_batching_dims);
  field("start_index_map", gd.start_index_map);
  nums += (first ? "" : ", ") + std::string("index_vector_dim = ") + std::to_string(gd.index_vector_dim) + ">";
  return operand.builder().emit(
      "gather", {operand, indices}, TensorType{operand.element(), result_dims},
      "dimension_numbers = " + nums + ", slice_sizes = " + dims_attr(slice_sizes) + ", indices_are_sorted = false");
}

Value scatter(Value operand, Value indices, Value updates, const ScatterDims& sd, const char* combine) {
  std::string nums = "#stablehlo.scatter<";
  bool first = true;
  auto field = [&](const char* name, const Dims& d) {
    if (d.empty()) return;
    nums += (first ? "" : ", ") + std::string(name) + " = " + dims_list(d);
    first = false;
  };
  field("update_window_dims", sd.update_window_dims);
  field("inserted_window_dims", sd.inserted_window_dims);
  field("input_batching_dims", sd.input_batching_dims);
  field("scatter_indices_batching_dims", sd.scatter_indices_batching_dims);
  field("scatter_dims_to_operand_dims", sd.scatter_dims_to_operand_dims);
  nums += (first ? "" : ", ") + std::string("index_vector_dim = ") + std::to_string(sd.index_vector_dim) + ">";
  auto st = scalar_type(operand.element());
  std::string op = combine ? combine : "";
  return operand.builder()
      .emit_multi("scatter", {operand, indices, updates}, {operand.type()},
                  "scatter_dimension_numbers = " + nums + ", indices_are_sorted = false, unique_indices = false",
                  {st, st},
                  [op](Builder& rb, const std::vector<Value>& a) {
                    if (op.empty()) return std::vector<Value>{a[1]};
                    return std::vector<Value>{rb.emit(op, {a[0], a[1]}, a[0].type())};
                  })[0];
}

Value gather_1d(Value operand_1d, Value indices) {
  GatherDims gd;
  gd.collapsed_slice_dims = {0};
  gd.start_index_map = {0};
  gd.index_vector_dim = indices.rank();
  return gather(operand_1d, indices, gd, {1}, indices.dims());
}

Value scatter_1d(Value operand_1d, Value indices, Value updates, const char* combine) {
  ScatterDims sd;
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = indices.rank();
  return scatter(operand_1d, indices, updates, sd, combine);
}

std::vector<Value> sort(const std::vector<Value>& xs, int64_t dim, bool descending, bool stable) {
  Builder& b = xs[0].builder();
  std::vector<TensorType> results, region_args;
  for (auto& x : xs) {
    results.push_back(x.type());
    region_args.push_back(scalar_type(x.element()));
    region_args.push_back(scalar_type(x.element()));
  }
  ElementType key = xs[0].element();
  return b.emit_multi(
      "sort", xs, results,
      "dimension = " + std::to_string(dim) + " : i64, is_stable = " + (stable ? "true" : "false"), region_args,
      [descending, key](Builder& rb, const std::vector<Value>& a) {
        // Total order puts NaN above +inf, which is where PyTorch sorts it.
        const char* type = is_float(key) ? "TOTALORDER" : compare_type(key);
        Value lhs = descending ? a[1] : a[0];
        Value rhs = descending ? a[0] : a[1];
        Value r = rb.emit("compare", {lhs, rhs}, TensorType{ElementType::kPred, {}},
                          std::string("comparison_direction = #stablehlo<comparison_direction LT>, compare_type = "
                                      "#stablehlo<comparison_type ") +
                              type + ">");
        return std::vector<Value>{r};
      });
}

std::pair<Value, Value> rng_bit_generator(Value key, const Dims& dims, ElementType bits_type) {
  auto outs = key.builder().emit_multi("rng_bit_generator", {key}, {key.type(), TensorType{bits_type, dims}},
                                       "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>");
  return {outs[0], outs[1]};
}

}  // namespace torch_tpu::hlo

// ---- [linalg] loops and dense linear-algebra primitives --------------------
namespace torch_tpu::hlo {

std::vector<Value> while_loop(const std::vector<Value>& init, const LoopCond& cond, const LoopBody& body) {
  Builder& b = init.at(0).builder();
  std::vector<TensorType> types;
  for (auto& v : init) types.push_back(v.type());
  RegionBody c = [&](Builder&, const std::vector<Value>& args) { return std::vector<Value>{cond(args)}; };
  RegionBody s = [&](Builder&, const std::vector<Value>& args) { return body(args); };
  return b.emit_regions("while", init, types, {{types, c}, {types, s}});
}

Value cholesky(Value a, bool lower) {
  return a.builder().emit("cholesky", {a}, a.type(), lower ? "lower = true" : "lower = false");
}

Value triangular_solve(Value a, Value b, bool left_side, bool lower, bool unit_diagonal, bool transpose_a) {
  std::string attrs = std::string("left_side = ") + (left_side ? "true" : "false") + ", lower = " +
                      (lower ? "true" : "false") + ", unit_diagonal = " + (unit_diagonal ? "true" : "false") +
                      ", transpose_a = #stablehlo<transpose " + (transpose_a ? "TRANSPOSE" : "NO_TRANSPOSE") + ">";
  return a.builder().emit("triangular_solve", {a, b}, b.type(), attrs);
}

}  // namespace torch_tpu::hlo

// ---- shape branch: constant index vectors and gathers along one dim ----------
namespace torch_tpu::hlo {

namespace {
Dims dims_except(int64_t rank, int64_t skip) {
  Dims out;
  for (int64_t i = 0; i < rank; ++i)
    if (i != skip) out.push_back(i);
  return out;
}
}  // namespace

Value constant_i64_vector(Builder& b, const Dims& values) {
  std::string lit = "[";
  for (size_t i = 0; i < values.size(); ++i) lit += (i ? ", " : "") + std::to_string(values[i]);
  lit += "]";
  TensorType t{ElementType::kI64, {static_cast<int64_t>(values.size())}};
  return b.emit("constant", {}, t, "value = dense<" + lit + "> : " + t.str());
}

Value take_along_dim(Value x, int64_t dim, Value idx) {
  int64_t k = idx.dim(0);
  Dims slice_sizes = x.dims();
  slice_sizes[dim] = 1;
  Dims result = x.dims();
  result[dim] = k;
  GatherDims gd;
  gd.offset_dims = dims_except(x.rank(), dim);
  gd.collapsed_slice_dims = {dim};
  gd.start_index_map = {dim};
  gd.index_vector_dim = 1;
  return gather(x, reshape(idx, {k, 1}), gd, slice_sizes, result);
}

Value scatter_add_along_dim(Value g, int64_t dim, Value idx, int64_t n) {
  Dims dims = g.dims();
  dims[dim] = n;
  ScatterDims sd;
  sd.update_window_dims = dims_except(g.rank(), dim);
  sd.inserted_window_dims = {dim};
  sd.scatter_dims_to_operand_dims = {dim};
  sd.index_vector_dim = 1;
  return scatter(full(g.builder(), g.element(), dims, 0), reshape(idx, {idx.dim(0), 1}), g, sd, "add");
}

}  // namespace torch_tpu::hlo
