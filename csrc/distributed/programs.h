// StableHLO text of the collective programs tpu_dist runs (docs/design.md,
// "Distributed"). Every program works on 1-D arrays (a tensor's elements),
// is replicated over the W devices of a group (mhlo.num_replicas = W) and
// names all of them in one replica group, so XLA carries the bytes.
// Each text is built once per distinct program and kept for the process's
// life (the functions return references to it).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hlo/types.h"

namespace torch_tpu::distributed {

enum class Reduce { kSum, kProd, kMin, kMax, kBand, kBor, kBxor };
bool bitwise(Reduce r);

// (n) -> (n); `avg` divides the sum by W.
const std::string& all_reduce_program(hlo::ElementType e, int64_t n, Reduce r, bool avg, int world);
// (n) -> (W*n), rank i's block at i*n.
const std::string& all_gather_program(hlo::ElementType e, int64_t n, int world);
// (W*n) -> (n): block i reduced over ranks lands on rank i.
const std::string& reduce_scatter_program(hlo::ElementType e, int64_t n, Reduce r, bool avg, int world);
// (n) -> (n): root's elements on every rank, bit for bit (an integer sum
// of root's bits with every other rank's zeros; XLA:CPU has no
// collective_broadcast). Bitwise reductions gather and combine locally
// (XLA:CPU's collectives reduce with add, multiply, min, max only).
const std::string& broadcast_program(hlo::ElementType e, int64_t n, int root, int world);
// (W*n) -> (n) on one device: elements [offset, offset + n), divided by W
// for `avg` (a rank's block of an all-reduce, programs.cpp says why).
const std::string& block_program(hlo::ElementType e, int64_t n, int64_t offset, bool avg, int world);
// (W*n) -> (n): block i of root's input on rank i, bit for bit.
const std::string& scatter_program(hlo::ElementType e, int64_t n, int root, int world);
// (W*c) -> (W*c): block j goes to rank j, arriving as block i from rank i.
const std::string& all_to_all_program(hlo::ElementType e, int64_t c, int world);
// (n) -> (n) over 2 replicas: replica `src`'s elements arrive on the other
// one (a point-to-point transfer; p2p_queue.h says in which order they run).
const std::string& send_program(hlo::ElementType e, int64_t n, int src);

// Where a program's result is written (docs/design.md, "Distributed: where
// the time goes"). XLA:CPU otherwise writes it into fresh memory (a page
// fault per 4 KiB on first touch) after copying the input there.
// `program` with a last parameter %donor of the result's type, unused but
// for holding the result (an output tensor's old buffer, or a recycled one).
std::string with_result_donor(const std::string& program, hlo::ElementType e, int64_t out_n);

// `program` checked inside itself (docs/design.md, "Ranks that disagree"):
// every rank first all-gathers `signature` (what it is about to run: a hash
// of the program, its element type and result size), and the collective
// runs only if every rank's equals its own (every rank then decides alike);
// else the result is the input where it has the result's type (an in-place
// collective's tensor keeps its values), else the donor, else zeros. One more
// result, a deferred-check flag tensor<2xi64> (runtime/deferred_checks.h):
// [1 if the ranks differ, the first rank whose signature differs from this
// one's]. No host round trip before the collective.
std::string with_rank_check(const std::string& program, const int64_t signature[3], int world);

}  // namespace torch_tpu::distributed
