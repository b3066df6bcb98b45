// torch's `scan` and `while_loop` on tpu as one stablehlo.while, `cond` as one
// stablehlo.if (docs/design.md, "Loops as one stablehlo.while"): the program
// around a recorded loop body or branches
// (runtime/regions.h). Every operand and result is a 1-D array (a storage's
// buffer): the loop's tensors are passed flattened.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hlo/types.h"
#include "runtime/regions.h"

namespace torch_tpu::exec {

// scan(combine_fn, init, xs, additional): the body maps (carries, one slice of
// each x, additional) to (next carries, ys). Operands: carries, xs (`length`
// slices each, one after another), additional, then body.outside; results:
// the last carries, each y stacked over the steps, then one flag per
// body.checks (its first failure). Throws c10::Error when the body's
// carries do not keep their types.
std::string scan_module(const runtime::RegionTrace& body, const std::vector<hlo::TensorType>& carries,
                        const std::vector<hlo::TensorType>& x_slices, const std::vector<hlo::TensorType>& additional,
                        int64_t length);

// while_loop(cond_fn, body_fn, carried, additional): operands carried,
// additional, cond.outside, body.outside; results: the carried values when
// cond (a one-element bool) is false, then one flag per body.checks. A cond
// with checks is refused.
std::string while_module(const runtime::RegionTrace& cond, const runtime::RegionTrace& body,
                         const std::vector<hlo::TensorType>& carried, const std::vector<hlo::TensorType>& additional);

// cond(pred, true_fn, false_fn, operands) as one stablehlo.if: operands pred
// (one bool), operands, on_true.outside, on_false.outside; results: the
// chosen branch's. The branches must return the same types and check nothing.
std::string cond_module(const runtime::RegionTrace& on_true, const runtime::RegionTrace& on_false,
                        const std::vector<hlo::TensorType>& operands);

}  // namespace torch_tpu::exec
