// Generic-form StableHLO (what XLA parses most strictly) for the collective
// programs; see programs.h.
#include "distributed/programs.h"

#include <c10/util/Exception.h>

#include <mutex>
#include <sstream>
#include <unordered_map>

namespace torch_tpu::distributed {
namespace {

using hlo::ElementType;

std::string tensor(ElementType e, int64_t n) { return "tensor<" + std::to_string(n) + "x" + hlo::element_name(e) + ">"; }
std::string scalar(ElementType e) { return std::string("tensor<") + hlo::element_name(e) + ">"; }

// Every program: one group of all W replicas. A channel id keeps XLA's
// cross-replica mode for all-reduce/gather/scatter; XLA:CPU's all-to-all
// reads a channel id as cross-partition, so it goes without, and its
// collective-permute crashes with one (jax 0.10.1).
std::string group_attrs(int world, bool channel = true) {
  std::string g = "replica_groups = dense<[[";
  for (int i = 0; i < world; ++i) g += (i ? ", " : "") + std::to_string(i);
  g += "]]> : tensor<1x" + std::to_string(world) + "xi64>";
  if (channel) g += ", channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>";
  return g;
}

std::string module(int world, const std::string& args, const std::string& result, const std::string& body) {
  std::ostringstream m;
  m << "module @collective attributes {mhlo.num_replicas = " << world << " : i32, mhlo.num_partitions = 1 : i32} {\n"
    << "  func.func public @main(" << args << ") -> (" << result << ") {\n"
    << body << "  }\n}\n";
  return m.str();
}

const char* combiner(Reduce r) {
  switch (r) {
    case Reduce::kSum: return "stablehlo.add";
    case Reduce::kProd: return "stablehlo.multiply";
    case Reduce::kMin: return "stablehlo.minimum";
    case Reduce::kMax: return "stablehlo.maximum";
    case Reduce::kBand: return "stablehlo.and";
    case Reduce::kBor: return "stablehlo.or";
    case Reduce::kBxor: return "stablehlo.xor";
  }
  return "?";
}

std::string region(ElementType e, Reduce r) {
  std::string s = scalar(e);
  return "({\n    ^bb0(%a: " + s + ", %b: " + s + "):\n      %c = \"" + combiner(r) + "\"(%a, %b) : (" + s + ", " + s +
         ") -> " + s + "\n      \"stablehlo.return\"(%c) : (" + s + ") -> ()\n    })";
}

std::string constant(ElementType e, int64_t n, const std::string& value, const std::string& name) {
  return "    " + name + " = \"stablehlo.constant\"() {value = dense<" + value + "> : " + tensor(e, n) + "} : () -> " +
         tensor(e, n) + "\n";
}

// %out = %in / W, for AVG.
std::string divide_by_world(ElementType e, int64_t n, int world, const std::string& in, const std::string& out) {
  std::string w = hlo::is_float(e) ? std::to_string(world) + ".0" : std::to_string(world);
  return constant(e, n, w, "%w") + "    " + out + " = \"stablehlo.divide\"(" + in + ", %w) : (" + tensor(e, n) + ", " +
         tensor(e, n) + ") -> " + tensor(e, n) + "\n";
}

// Ends a body whose result %r is (n): divided by W for AVG, then returned.
std::string returning(std::string body, ElementType e, int64_t n, bool avg, int world) {
  std::string res = "%r";
  if (avg) {
    body += divide_by_world(e, n, world, "%r", "%avg");
    res = "%avg";
  }
  return body + "    \"func.return\"(" + res + ") : (" + tensor(e, n) + ") -> ()\n";
}

// The integer type of the same width, for moving bits exactly.
ElementType bits_type(ElementType e) {
  switch (hlo::element_bits(e)) {
    case 8: return ElementType::kI8;
    case 16: return ElementType::kI16;
    case 32: return ElementType::kI32;
    case 64: return ElementType::kI64;
  }
  TORCH_CHECK(false, "tpu_dist: cannot move elements of type ", hlo::element_name(e), " bit for bit");
}

// %sel: %x's bits on replica `root`, zeros elsewhere; returns its type.
ElementType root_bits(ElementType e, int64_t n, int root, std::string& body) {
  ElementType b = bits_type(e);
  body += "    %rid = \"stablehlo.replica_id\"() : () -> tensor<ui32>\n";
  body += "    %root = \"stablehlo.constant\"() {value = dense<" + std::to_string(root) +
          "> : tensor<ui32>} : () -> tensor<ui32>\n";
  body += "    %is = \"stablehlo.compare\"(%rid, %root) {comparison_direction = #stablehlo<comparison_direction EQ>} : "
          "(tensor<ui32>, tensor<ui32>) -> tensor<i1>\n";
  std::string x = "%arg0";
  if (b != e) {
    body += "    %bits = \"stablehlo.bitcast_convert\"(%arg0) : (" + tensor(e, n) + ") -> " + tensor(b, n) + "\n";
    x = "%bits";
  }
  body += constant(b, n, "0", "%zero");
  body += "    %sel = \"stablehlo.select\"(%is, " + x + ", %zero) : (tensor<i1>, " + tensor(b, n) + ", " + tensor(b, n) +
          ") -> " + tensor(b, n) + "\n";
  return b;
}

std::string from_bits(ElementType e, ElementType b, int64_t n, const std::string& in, std::string& body) {
  if (b == e) return in;
  body += "    %back = \"stablehlo.bitcast_convert\"(" + in + ") : (" + tensor(b, n) + ") -> " + tensor(e, n) + "\n";
  return "%back";
}

}  // namespace

bool bitwise(Reduce r) { return r == Reduce::kBand || r == Reduce::kBor || r == Reduce::kBxor; }

namespace {
namespace text {  // the programs' text, built on every call (memoised below)

std::string all_reduce_program(ElementType e, int64_t n, Reduce r, bool avg, int world) {
  std::string t = tensor(e, n);
  if (bitwise(r)) {
    // XLA:CPU's collectives reduce with add, multiply, min and max only:
    // gather every rank's elements and combine them here.
    std::string g = tensor(e, n * world);
    std::string m = "tensor<" + std::to_string(world) + "x" + std::to_string(n) + "x" + hlo::element_name(e) + ">";
    std::string body = "    %g = \"stablehlo.all_gather\"(%arg0) {all_gather_dim = 0 : i64, " + group_attrs(world) +
                       "} : (" + t + ") -> " + g + "\n";
    body += "    %m = \"stablehlo.reshape\"(%g) : (" + g + ") -> " + m + "\n";
    std::string init = r != Reduce::kBand ? "0" : hlo::is_unsigned_int(e) ? "255" : "-1";
    TORCH_CHECK(r != Reduce::kBand || !hlo::is_unsigned_int(e) || e == ElementType::kU8,
                "tpu_dist: BAND of ", hlo::element_name(e), " is not supported");
    body += "    %init = \"stablehlo.constant\"() {value = dense<" + init + "> : " + scalar(e) + "} : () -> " + scalar(e) +
            "\n";
    body += "    %r = \"stablehlo.reduce\"(%m, %init) " + region(e, r) + " {dimensions = array<i64: 0>} : (" + m + ", " +
            scalar(e) + ") -> " + t + "\n";
    body += "    \"func.return\"(%r) : (" + t + ") -> ()\n";
    return module(world, "%arg0: " + t, t, body);
  }
  std::string body = "    %r = \"stablehlo.all_reduce\"(%arg0) " + region(e, r) + " {" + group_attrs(world) + "} : (" + t +
                     ") -> " + t + "\n";
  return module(world, "%arg0: " + t, t, returning(body, e, n, avg, world));
}

std::string all_gather_program(ElementType e, int64_t n, int world) {
  std::string in = tensor(e, n), out = tensor(e, n * world);
  std::string body = "    %r = \"stablehlo.all_gather\"(%arg0) {all_gather_dim = 0 : i64, " + group_attrs(world) + "} : (" +
                     in + ") -> " + out + "\n    \"func.return\"(%r) : (" + out + ") -> ()\n";
  return module(world, "%arg0: " + in, out, body);
}

std::string reduce_scatter_program(ElementType e, int64_t n, Reduce r, bool avg, int world) {
  std::string in = tensor(e, n * world), out = tensor(e, n);
  std::string body = "    %r = \"stablehlo.reduce_scatter\"(%arg0) " + region(e, r) + " {scatter_dimension = 0 : i64, " +
                     group_attrs(world) + "} : (" + in + ") -> " + out + "\n";
  return module(world, "%arg0: " + in, out, returning(body, e, n, avg, world));
}

std::string block_program(ElementType e, int64_t n, int64_t offset, bool avg, int world) {
  std::string in = tensor(e, n * world), out = tensor(e, n);
  std::string body = "    %r = \"stablehlo.slice\"(%arg0) {start_indices = array<i64: " + std::to_string(offset) +
                     ">, limit_indices = array<i64: " + std::to_string(offset + n) + ">, strides = array<i64: 1>} : (" +
                     in + ") -> " + out + "\n";
  return module(1, "%arg0: " + in, out, returning(body, e, n, avg, world));
}

std::string broadcast_program(ElementType e, int64_t n, int root, int world) {
  std::string body;
  ElementType b = root_bits(e, n, root, body);
  body += "    %r = \"stablehlo.all_reduce\"(%sel) " + region(b, Reduce::kSum) + " {" + group_attrs(world) + "} : (" +
          tensor(b, n) + ") -> " + tensor(b, n) + "\n";
  std::string res = from_bits(e, b, n, "%r", body);
  body += "    \"func.return\"(" + res + ") : (" + tensor(e, n) + ") -> ()\n";
  return module(world, "%arg0: " + tensor(e, n), tensor(e, n), body);
}

std::string scatter_program(ElementType e, int64_t n, int root, int world) {
  std::string body;
  ElementType b = root_bits(e, n * world, root, body);
  body += "    %r = \"stablehlo.reduce_scatter\"(%sel) " + region(b, Reduce::kSum) + " {scatter_dimension = 0 : i64, " +
          group_attrs(world) + "} : (" + tensor(b, n * world) + ") -> " + tensor(b, n) + "\n";
  std::string res = from_bits(e, b, n, "%r", body);
  body += "    \"func.return\"(" + res + ") : (" + tensor(e, n) + ") -> ()\n";
  return module(world, "%arg0: " + tensor(e, n * world), tensor(e, n), body);
}

std::string all_to_all_program(ElementType e, int64_t c, int world) {
  std::string t = tensor(e, c * world);
  std::string body = "    %r = \"stablehlo.all_to_all\"(%arg0) {split_dimension = 0 : i64, concat_dimension = 0 : i64, "
                     "split_count = " + std::to_string(world) + " : i64, " + group_attrs(world, false) + "} : (" + t + ") -> " +
                     t + "\n    \"func.return\"(%r) : (" + t + ") -> ()\n";
  return module(world, "%arg0: " + t, t, body);
}

std::string send_program(ElementType e, int64_t n, int src) {
  TORCH_CHECK(src == 0 || src == 1, "tpu_dist: internal error: send from replica ", src, " of 2");
  std::string t = tensor(e, n);
  std::string pair = src == 0 ? "[[0, 1]]" : "[[1, 0]]";
  std::string body = "    %r = \"stablehlo.collective_permute\"(%arg0) {source_target_pairs = dense<" + pair + "> : "
                     "tensor<1x2xi64>} : (" + t +
                     ") -> " + t + "\n    \"func.return\"(%r) : (" + t + ") -> ()\n";
  return module(2, "%arg0: " + t, t, body);
}

}  // namespace text
}  // namespace

namespace {

// Built once per distinct program: a training loop runs the same few
// collectives again and again, and building the text took 16-21 us of
// host time a call (docs/design.md, "Per-call host cost, and the rank
// check's"). Calls may come from several threads.
template <typename Build>
const std::string& memo(const std::string& key, Build build) {
  static auto* mu = new std::mutex();
  static auto* texts = new std::unordered_map<std::string, std::string>();  // nodes: references stay valid
  std::lock_guard<std::mutex> lock(*mu);
  auto it = texts->find(key);
  if (it == texts->end()) it = texts->emplace(key, build()).first;
  return it->second;
}

template <typename... A>
std::string key(const char* kind, A... args) {
  std::string k = kind;
  ((k += ',', k += std::to_string(static_cast<int64_t>(args))), ...);
  return k;
}

}  // namespace

const std::string& all_reduce_program(ElementType e, int64_t n, Reduce r, bool avg, int world) {
  return memo(key("all_reduce", e, n, r, avg, world), [&] { return text::all_reduce_program(e, n, r, avg, world); });
}
const std::string& all_gather_program(ElementType e, int64_t n, int world) {
  return memo(key("all_gather", e, n, world), [&] { return text::all_gather_program(e, n, world); });
}
const std::string& reduce_scatter_program(ElementType e, int64_t n, Reduce r, bool avg, int world) {
  return memo(key("reduce_scatter", e, n, r, avg, world),
              [&] { return text::reduce_scatter_program(e, n, r, avg, world); });
}
const std::string& block_program(ElementType e, int64_t n, int64_t offset, bool avg, int world) {
  return memo(key("block", e, n, offset, avg, world), [&] { return text::block_program(e, n, offset, avg, world); });
}
const std::string& broadcast_program(ElementType e, int64_t n, int root, int world) {
  return memo(key("broadcast", e, n, root, world), [&] { return text::broadcast_program(e, n, root, world); });
}
const std::string& scatter_program(ElementType e, int64_t n, int root, int world) {
  return memo(key("scatter", e, n, root, world), [&] { return text::scatter_program(e, n, root, world); });
}
const std::string& all_to_all_program(ElementType e, int64_t c, int world) {
  return memo(key("all_to_all", e, c, world), [&] { return text::all_to_all_program(e, c, world); });
}
const std::string& send_program(ElementType e, int64_t n, int src) {
  return memo(key("send", e, n, src), [&] { return text::send_program(e, n, src); });
}

namespace {

// The position of @main's parameter list's end (before ") -> (").
size_t params_end(const std::string& program) {
  size_t end = program.find(") -> (", program.find("func.func public @main("));
  TORCH_CHECK(end != std::string::npos, "tpu_dist: internal error: collective program without @main");
  return end;
}

}  // namespace

std::string with_result_donor(const std::string& program, ElementType e, int64_t out_n) {
  std::string s = program;
  return s.insert(params_end(s), ", %donor: " + tensor(e, out_n) + " {tf.aliasing_output = 0 : i32}");
}

namespace {

// The region of a reduction of i1 values with `op` ("stablehlo.or").
std::string bool_region(const char* op) {
  return "({\n    ^bb0(%a: tensor<i1>, %b: tensor<i1>):\n      %c = \"" + std::string(op) +
         "\"(%a, %b) : (tensor<i1>, tensor<i1>) -> tensor<i1>\n      \"stablehlo.return\"(%c) : (tensor<i1>) -> ()\n    })";
}

}  // namespace

std::string with_rank_check(const std::string& program, const int64_t signature[3], int world) {
  const std::string head = "func.func public @main(";
  size_t main = program.find(head);
  size_t arrow = program.find(") -> (", main);
  size_t open = program.find(") {\n", arrow);
  size_t ret = program.rfind("    \"func.return\"(");
  TORCH_CHECK(main != std::string::npos && arrow != std::string::npos && open != std::string::npos &&
                  ret != std::string::npos && ret > open,
              "tpu_dist: internal error: unexpected collective program");
  std::string result = program.substr(arrow + 6, open - arrow - 6);  // one result type
  size_t body_at = open + 4;
  std::string body = program.substr(body_at, ret - body_at);
  size_t ret_end = program.find('\n', ret);
  std::string ret_line = program.substr(ret, ret_end - ret);  // "func.return"(%x) : (T) -> ()
  ret_line.replace(ret_line.find("func.return"), 11, "stablehlo.return");

  const std::string W = std::to_string(world);
  const std::string sig = "tensor<3xi64>", all = "tensor<" + std::to_string(3 * world) + "xi64>",
                    table = "tensor<" + W + "x3xi64>", rows = "tensor<" + W + "xi64>";
  std::string c;
  c += "    %chk_sig = \"stablehlo.constant\"() {value = dense<[" + std::to_string(signature[0]) + ", " +
       std::to_string(signature[1]) + ", " + std::to_string(signature[2]) + "]> : " + sig + "} : () -> " + sig + "\n";
  std::string groups = group_attrs(world, false) + ", channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>";
  c += "    %chk_all = \"stablehlo.all_gather\"(%chk_sig) {all_gather_dim = 0 : i64, " + groups + "} : (" + sig + ") -> " +
       all + "\n";
  c += "    %chk_t = \"stablehlo.reshape\"(%chk_all) : (" + all + ") -> " + table + "\n";
  c += "    %chk_me = \"stablehlo.broadcast_in_dim\"(%chk_sig) {broadcast_dimensions = array<i64: 1>} : (" + sig + ") -> " +
       table + "\n";
  c += "    %chk_ne = \"stablehlo.compare\"(%chk_t, %chk_me) {comparison_direction = #stablehlo<comparison_direction NE>} : (" +
       table + ", " + table + ") -> tensor<" + W + "x3xi1>\n";
  c += "    %chk_false = \"stablehlo.constant\"() {value = dense<false> : tensor<i1>} : () -> tensor<i1>\n";
  c += "    %chk_row = \"stablehlo.reduce\"(%chk_ne, %chk_false) " + bool_region("stablehlo.or") +
       " {dimensions = array<i64: 1>} : (tensor<" + W + "x3xi1>, tensor<i1>) -> tensor<" + W + "xi1>\n";
  c += "    %chk_bad = \"stablehlo.reduce\"(%chk_row, %chk_false) " + bool_region("stablehlo.or") +
       " {dimensions = array<i64: 0>} : (tensor<" + W + "xi1>, tensor<i1>) -> tensor<i1>\n";
  c += "    %chk_ok = \"stablehlo.not\"(%chk_bad) : (tensor<i1>) -> tensor<i1>\n";
  // the first rank that differs (W if none)
  c += "    %chk_iota = \"stablehlo.iota\"() {iota_dimension = 0 : i64} : () -> " + rows + "\n";
  c += "    %chk_w = \"stablehlo.constant\"() {value = dense<" + W + "> : " + rows + "} : () -> " + rows + "\n";
  c += "    %chk_at = \"stablehlo.select\"(%chk_row, %chk_iota, %chk_w) : (tensor<" + W + "xi1>, " + rows + ", " + rows +
       ") -> " + rows + "\n";
  c += "    %chk_big = \"stablehlo.constant\"() {value = dense<" + W + "> : tensor<i64>} : () -> tensor<i64>\n";
  c += "    %chk_first = \"stablehlo.reduce\"(%chk_at, %chk_big) ({\n    ^bb0(%a: tensor<i64>, %b: tensor<i64>):\n"
       "      %c = \"stablehlo.minimum\"(%a, %b) : (tensor<i64>, tensor<i64>) -> tensor<i64>\n"
       "      \"stablehlo.return\"(%c) : (tensor<i64>) -> ()\n    }) {dimensions = array<i64: 0>} : (" + rows +
       ", tensor<i64>) -> tensor<i64>\n";
  c += "    %chk_fail = \"stablehlo.convert\"(%chk_bad) : (tensor<i1>) -> tensor<i64>\n";
  c += "    %chk_f1 = \"stablehlo.reshape\"(%chk_fail) : (tensor<i64>) -> tensor<1xi64>\n";
  c += "    %chk_v1 = \"stablehlo.reshape\"(%chk_first) : (tensor<i64>) -> tensor<1xi64>\n";
  c += "    %chk_flag = \"stablehlo.concatenate\"(%chk_f1, %chk_v1) {dimension = 0 : i64} : (tensor<1xi64>, "
       "tensor<1xi64>) -> tensor<2xi64>\n";
  // the collective, only where every rank runs the same one
  // what the result is where the ranks differ: the input of an in-place
  // collective (its tensor keeps its values), else the donor, else zeros
  size_t arg0 = program.find("%arg0: ", main) + 7;
  std::string arg0_type = program.substr(arg0, program.find_first_of(",)", arg0) - arg0);
  std::string fallback = arg0_type == result ? "%arg0" : program.find("%donor: ", main) < arrow ? "%donor" : "";
  std::string other;
  std::string fb = fallback;
  if (fb.empty()) {
    std::string elem = result.substr(result.rfind('x') + 1);
    const char* zero = elem[0] == 'f' || elem[0] == 'b' ? "0.0" : "0";  // f32, bf16 ...; i32, ui8 ...
    other = "      %chk_zero = \"stablehlo.constant\"() {value = dense<" + std::string(zero) + "> : " + result +
            "} : () -> " + result + "\n";
    fb = "%chk_zero";
  }
  other += "      \"stablehlo.return\"(" + fb + ") : (" + result + ") -> ()\n";
  c += "    %chk_res = \"stablehlo.if\"(%chk_ok) ({\n" + body + ret_line + "\n    }, {\n" + other + "    }) : (tensor<i1>) -> " +
       result + "\n";
  c += "    \"func.return\"(%chk_res, %chk_flag) : (" + result + ", tensor<2xi64>) -> ()\n";

  std::string out = program.substr(0, arrow) + ") -> (" + result + ", tensor<2xi64>) {\n" + c +
                    program.substr(ret_end + 1);
  return out;
}

}  // namespace torch_tpu::distributed
