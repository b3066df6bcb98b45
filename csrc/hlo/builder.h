// A small StableHLO text builder. Ops are printed in MLIR's generic form
// (`%3 = "stablehlo.add"(%1, %2) : (...) -> ...`) so that one emitter
// serves every op; typed helpers live in hlo/ops.h.
#pragma once

#include <deque>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hlo/types.h"

namespace torch_tpu::hlo {

class Builder;

// Thrown by emit when an elementwise op is given an element type StableHLO
// does not define it for (the exponential of an integer, the difference of
// two booleans). A lowering rule meets it when its ATen op was called with
// a dtype the op does not support (softmax of int64): the op runner reports
// it as PyTorch's dispatch does ("... not implemented for 'Long'",
// NotImplementedError) instead of handing XLA a program it rejects.
struct UnsupportedElementType : std::invalid_argument {
  UnsupportedElementType(const std::string& what, ElementType e) : std::invalid_argument(what), element(e) {}
  ElementType element;  // the operand's type StableHLO refused
};

// Handle to an SSA value inside one Builder.
class Value {
 public:
  Value() = default;
  Value(Builder* b, int id) : b_(b), id_(id) {}

  bool valid() const { return b_ != nullptr; }
  Builder& builder() const { return *b_; }
  int id() const { return id_; }
  const TensorType& type() const;
  ElementType element() const { return type().element; }
  const std::vector<int64_t>& dims() const { return type().dims; }
  int64_t rank() const { return type().rank(); }
  int64_t dim(int64_t i) const { return type().dims[i]; }

 private:
  Builder* b_ = nullptr;
  int id_ = -1;
};

// Body of a region (reduce, scatter, sort comparators): gets the block
// arguments and returns the values to yield.
using RegionBody = std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>;

class Builder {
 public:
  Value parameter(TensorType type);

  // Emit one op with a single result. `attrs` is the text between braces
  // without the braces, e.g. "dimensions = array<i64: 1>".
  Value emit(std::string_view op, const std::vector<Value>& operands, TensorType result,
             std::string_view attrs = {});

  // Emit one op with several results and an optional region whose block
  // arguments have `region_args` types.
  std::vector<Value> emit_multi(std::string_view op, const std::vector<Value>& operands,
                                const std::vector<TensorType>& results, std::string_view attrs = {},
                                const std::vector<TensorType>& region_args = {},
                                const RegionBody& body = nullptr);

  // [linalg] Emit one op with several regions (stablehlo.while: cond, body),
  // each given as (block argument types, body).
  std::vector<Value> emit_regions(std::string_view op, const std::vector<Value>& operands,
                                  const std::vector<TensorType>& results,
                                  const std::vector<std::pair<std::vector<TensorType>, RegionBody>>& regions);

  // The whole module, returning `results` from @main.
  std::string module_text(const std::vector<Value>& results) const;

  const TensorType& type_of(int id) const { return types_[id]; }
  const std::string& name_of(int id) const { return names_[id]; }
  size_t num_parameters() const { return params_.size(); }

 private:
  int new_value(TensorType t, std::string name);
  std::string region_text(const std::vector<TensorType>& region_args, const RegionBody& body);
  std::string operand_list(const std::vector<Value>& v) const;
  std::string type_list(const std::vector<Value>& v) const;

  // Deques: Value::type() hands out references that must survive later
  // emits (a vector would move its elements when it grows).
  std::deque<TensorType> types_;
  std::deque<std::string> names_;
  std::vector<int> params_;
  std::string body_;
  int next_ssa_ = 0;
  int indent_ = 4;
};

}  // namespace torch_tpu::hlo
