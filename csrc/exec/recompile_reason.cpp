#include "exec/recompile_reason.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "device/storage.h"
#include "lowering/context.h"
#include "runtime/compiler_options.h"

namespace torch_tpu::exec {
namespace {

std::string join_ints(at::IntArrayRef v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string dtype_name(at::ScalarType t) {
  std::string s = c10::toString(t);  // "Float"
  // PyTorch's Python spelling reads better in a log: float32, bfloat16, ...
  static const std::unordered_map<std::string, std::string> py = {
      {"Float", "float32"}, {"Double", "float64"}, {"Half", "float16"}, {"BFloat16", "bfloat16"},
      {"Int", "int32"},     {"Long", "int64"},     {"Short", "int16"},  {"Char", "int8"},
      {"Byte", "uint8"},    {"Bool", "bool"},      {"ComplexFloat", "complex64"},
      {"ComplexDouble", "complex128"}};
  auto it = py.find(s);
  return it == py.end() ? s : it->second;
}

bool is_scalar_type(const c10::Argument& a) {
  auto kind = a.type()->kind();
  if (kind == c10::TypeKind::OptionalType) kind = a.type()->containedType(0)->kind();
  return kind == c10::TypeKind::NumberType;
}

struct Describer {
  CallFacts& out;
  std::vector<const void*> storages;
  lowering::WrittenStorages written;  // the op's (lowering::offset_is_operand)
  bool in_written_arg = false;

  void fact(const std::string& arg, const char* aspect, std::string value) {
    out.push_back(ArgFact{arg, aspect, std::move(value)});
  }

  void tensor(const std::string& label, const at::Tensor& t) {
    if (t.device().is_cpu()) {
      fact(label, "device", "cpu");
      fact(label, "dtype", dtype_name(t.scalar_type()));
      fact(label, "shape", join_ints(t.sizes()));
      return;
    }
    fact(label, "device", "tpu");
    fact(label, "dtype", dtype_name(t.scalar_type()));
    fact(label, "shape", join_ints(t.sizes()));
    fact(label, "strides", join_ints(t.strides()));
    // A runtime operand's value is not part of the program: only that it is nonzero.
    fact(label, "storage offset",
         lowering::offset_is_operand(t, in_written_arg, written) ? "nonzero" : std::to_string(t.storage_offset()));
    fact(label, "storage bytes", std::to_string(t.storage().nbytes()));
    auto& sb = device::storage_buffer(t.storage());
    fact(label, "storage buffer", sb.buffer ? dtype_name(sb.dtype) : "unwritten");
    const void* impl = t.storage().unsafeGetStorageImpl();
    size_t pos = 0;
    while (pos < storages.size() && storages[pos] != impl) ++pos;
    if (pos == storages.size()) storages.push_back(impl);
    fact(label, "storage", pos + 1 == storages.size() ? "own" : "shared with an earlier argument");
  }

  void value(const std::string& label, const c10::IValue& v, const c10::Argument& a, const KeyOptions& o) {
    if (v.isTensor()) {
      if (v.toTensor().defined())
        tensor(label, v.toTensor());
      else
        fact(label, "value", "None");
    } else if (v.isNone()) {
      fact(label, "value", "None");
    } else if (v.isList()) {
      auto list = v.toListRef();
      fact(label, "length", std::to_string(list.size()));
      // Short int lists (dims, sizes) read best whole; others item by item.
      bool ints = true;
      for (const auto& e : list) ints = ints && e.isInt();
      if (ints) {
        std::vector<int64_t> vals;
        for (const auto& e : list) vals.push_back(e.toInt());
        fact(label, "value", join_ints(vals));
        return;
      }
      for (size_t k = 0; k < list.size(); ++k) value(label + "[" + std::to_string(k) + "]", list[k], a, o);
    } else if (v.isScalar() && !o.static_scalars &&
               (is_scalar_type(a) || (o.runtime_floats && a.type()->kind() == c10::TypeKind::FloatType))) {
      fact(label, "Scalar kind", v.isDouble() ? "float" : v.isInt() ? "int" : v.isBool() ? "bool" : "complex");
      fact(label, "Scalar", lowering::is_default_scalar(a, v) ? "the default (a constant)" : "not the default (an operand)");
    } else if (v.isDouble()) {
      std::ostringstream os;
      os.precision(17);
      os << v.toDouble();
      fact(label, "value", os.str());
    } else if (v.isInt()) {
      fact(label, "value", std::to_string(v.toInt()));
    } else if (v.isBool()) {
      fact(label, "value", v.toBool() ? "True" : "False");
    } else if (v.isString()) {
      fact(label, "value", "'" + v.toStringRef() + "'");
    } else if (v.isGenerator()) {
      fact(label, "value", "a generator");
    } else if (v.isDevice()) {
      fact(label, "value", v.toDevice().str());
    } else {
      std::ostringstream os;
      os << v;
      fact(label, "value", os.str());
    }
  }
};

const char* precision_name(int p) {
  switch (p) {
    case 0: return "medium";
    case 1: return "high";
    default: return "highest";
  }
}

}  // namespace

CallFacts describe_call(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                        const KeyOptions& opts) {
  CallFacts facts;
  facts.push_back(ArgFact{"", "device", "tpu:" + std::to_string(opts.device)});
  facts.push_back(ArgFact{"", "matmul precision", precision_name(opts.matmul_precision)});
  std::string xla_options = runtime::compiler_options_text();  // custom_compiler_options blocks
  facts.push_back(ArgFact{"", "XLA options", xla_options.empty() ? "(defaults)" : xla_options});
  Describer d{facts, {}, lowering::written_storages(schema, args)};
  const auto& sargs = schema.arguments();
  int input = 0;
  for (size_t i = 0; i < args.size() && i < sargs.size(); ++i) {
    const auto& v = args[i];
    bool tensorish = v.isTensor() || (v.isList() && !v.toListRef().empty() && v.toListRef()[0].isTensor());
    std::string label = tensorish ? "input " + std::to_string(input++) + " '" + sargs[i].name() + "'"
                                  : "arg '" + sargs[i].name() + "'";
    d.in_written_arg = sargs[i].alias_info() && sargs[i].alias_info()->isWrite();
    d.value(label, v, sargs[i], opts);
  }
  return facts;
}

// What a reader checks first: kind and shape before the layout details
// that follow from them (strides, storage size).
constexpr int kLayoutRank = 7;  // strides, storage offset / bytes / buffer / sharing

static int aspect_rank(const std::string& aspect) {
  static const char* order[] = {"device", "matmul precision", "dtype", "shape", "value", "length", "Scalar kind"};
  for (int i = 0; i < 7; ++i)
    if (aspect == order[i]) return i;
  return kLayoutRank;
}

std::string diff_facts(const CallFacts& before, const CallFacts& now) {
  std::map<std::pair<std::string, std::string>, const std::string*> old;
  for (const auto& f : before) old[{f.arg, f.aspect}] = &f.value;
  struct Diff {
    int rank;
    std::string arg, text;
  };
  std::vector<Diff> diffs;  // stable-sorted by rank below
  auto say = [&](const ArgFact& f, const std::string& from, const std::string& to) {
    // "arg 'dim' [0] -> [1]" reads better than "arg 'dim' value [0] -> [1]".
    std::string s = f.arg.empty() ? f.aspect : f.aspect == "value" ? f.arg : f.arg + " " + f.aspect;
    diffs.push_back(Diff{aspect_rank(f.aspect), f.arg, s + " " + from + " -> " + to});
  };
  for (const auto& f : now) {
    auto it = old.find({f.arg, f.aspect});
    if (it == old.end()) {
      say(f, "(none)", f.value);
    } else {
      if (*it->second != f.value) say(f, *it->second, f.value);
      old.erase(it);
    }
  }
  for (const auto& f : before)
    if (old.count({f.arg, f.aspect})) say(f, f.value, "(none)");
  if (diffs.empty()) return "same description as the previous program (another argument layout)";
  // Strides and storage size follow from a new shape or dtype: say only
  // the cause for such an argument.
  std::set<std::string> resized;
  for (const auto& f : now) {
    auto it = std::find_if(before.begin(), before.end(),
                           [&](const ArgFact& b) { return b.arg == f.arg && b.aspect == f.aspect; });
    if ((f.aspect == "shape" || f.aspect == "dtype") && it != before.end() && it->value != f.value)
      resized.insert(f.arg);
  }
  diffs.erase(std::remove_if(diffs.begin(), diffs.end(),
                             [&](const Diff& d) { return d.rank == kLayoutRank && resized.count(d.arg); }),
              diffs.end());
  std::stable_sort(diffs.begin(), diffs.end(),
                   [](const Diff& a, const Diff& b) { return a.rank < b.rank; });
  std::string s;
  const size_t shown = 4;
  for (size_t i = 0; i < diffs.size() && i < shown; ++i) s += (i ? "; " : "") + diffs[i].text;
  if (diffs.size() > shown) s += "; (+" + std::to_string(diffs.size() - shown) + " more)";
  return s;
}

namespace {
struct History {
  int64_t count = 0;
  CallFacts last;
};
std::unordered_map<std::string, History>& histories() {
  static auto* by_op = new std::unordered_map<std::string, History>();
  return *by_op;
}
}  // namespace

NewProgram explain_new_program(const std::string& op, const CallFacts& facts) {
  auto it = histories().find(op);
  if (it == histories().end()) return NewProgram{1, "first compile"};
  return NewProgram{it->second.count + 1, diff_facts(it->second.last, facts)};
}

void remember_program(const std::string& op, CallFacts facts) {
  History& h = histories()[op];
  ++h.count;
  h.last = std::move(facts);
}

}  // namespace torch_tpu::exec
