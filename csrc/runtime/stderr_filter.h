// Drops known-noise lines that XLA's C++ logging writes to stderr during one
// call, passing every other line through unchanged.
//
// Why: loading a cached XLA:CPU executable logs an ERROR per program that the
// compile-time CPU features "+prefer-no-gather/+prefer-no-scatter" are not
// host features (openxla/xla#44565: they are LLVM tuning hints, not ISA
// features, so the check can never pass; the program loads and runs
// correctly). Our cache key already pins the exact CPU model and feature
// flags, so the message is pure noise, two 2 KB lines per program.
#pragma once

#include <cstdio>
#include <string>

namespace torch_tpu::runtime {

// While alive, file descriptor 2 points at a temporary file; the destructor
// restores it and re-emits the captured lines that do not contain `drop`.
// Hold the GIL around it so Python writes nothing meanwhile.
class StderrFilter {
 public:
  explicit StderrFilter(std::string drop);
  ~StderrFilter();
  StderrFilter(const StderrFilter&) = delete;
  StderrFilter& operator=(const StderrFilter&) = delete;

 private:
  std::string drop_;
  std::FILE* capture_ = nullptr;
  int saved_fd_ = -1;
};

}  // namespace torch_tpu::runtime
