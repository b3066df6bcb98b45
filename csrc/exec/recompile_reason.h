// Why an op needed a new program: a readable description of everything its
// program key is made of (op_runner.cpp's append_value), built only on a
// cache miss, and the difference from the op's previous program.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace torch_tpu::exec {

// One aspect of one argument: {"input 0 'self'", "shape", "[4, 8]"}.
struct ArgFact {
  std::string arg;
  std::string aspect;
  std::string value;
};
using CallFacts = std::vector<ArgFact>;

struct KeyOptions {
  int device = 0;
  int matmul_precision = 0;     // lowering::MatmulPrecision
  bool static_scalars = false;  // Scalars are in the key (arange)
  bool runtime_floats = false;  // float arguments are operands (fused optimizers)
};

// Mirrors the key: a change in the key is a change in these facts.
CallFacts describe_call(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                        const KeyOptions& opts);

// "input 0 'self' shape [4, 8] -> [4, 16]; arg 'dim' 1 -> 2" (at most a few
// differences, then "(+N more)").
std::string diff_facts(const CallFacts& before, const CallFacts& now);

// Per op name, the number of programs built so far and the facts of the
// last. explain_new_program reads them (count: this program's number;
// reason: "first compile" or the diff); remember_program records a program
// once it compiled, so a failing call leaves no trace. Runtime lock held.
struct NewProgram {
  int64_t count = 1;
  std::string reason;
};
NewProgram explain_new_program(const std::string& op, const CallFacts& facts);
void remember_program(const std::string& op, CallFacts facts);

}  // namespace torch_tpu::exec
