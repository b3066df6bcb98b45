// XLA compile options a user sets: the reference backend's
// `torch.tpu.compiler.custom_compiler_options({...})` blocks and its
// `torch.tpu.allow_excess_precision` property (docs/design.md, "User XLA
// options").
//
// The options in force are process-wide, not per thread: the backward ops
// of a step run on autograd's device threads, and they belong to the
// block that started them. Every in-memory program cache keys on
// compiler_options_id() (a program compiled under other options is
// another program), and the persistent cache on compiler_options_text().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch_tpu::runtime {

using XlaOption = std::pair<std::string, std::string>;  // name, value as given

// Opens a block of options; merged over the enclosing blocks, its own
// options win. Names must start with "xla_"; a name XLA does not know
// raises at the first compile in the block.
void push_compiler_options(const std::vector<XlaOption>& options);
// Closes the innermost block (no-op when none is open).
void pop_compiler_options();

// XLA's EffortLevel (xla.proto) for "O0".."O3", the values of
// xla_optimization_level and xla_memory_fitting_level; nullopt for others.
std::optional<int> xla_effort_level(const std::string& value);

// `allow_excess_precision`: set (true/false) or unset (std::nullopt: the
// XLA_FLAGS value, else the platform's default).
void set_allow_excess_precision(std::optional<bool> allow);
std::optional<bool> allow_excess_precision_setting();
// Whether XLA may use excess precision in the programs compiled now: the
// setting, else XLA_FLAGS' --xla_allow_excess_precision, else
// `platform_default`.
bool allow_excess_precision(bool platform_default);
// Whether XLA_FLAGS names --xla_allow_excess_precision (then the platform
// default is not forced over it).
bool xla_flags_set_excess_precision();

// The options in force, blocks merged and sorted by name, with the excess
// precision setting as `xla_allow_excess_precision` when set.
std::vector<XlaOption> compiler_options();
// Them as "name=value;..." ("" when none): a persistent-cache key input.
std::string compiler_options_text();
// A small number naming the options in force; 0 when there are none. The
// same set of options always gets the same id, so leaving a block finds
// the programs compiled before it again.
uint32_t compiler_options_id();

}  // namespace torch_tpu::runtime
