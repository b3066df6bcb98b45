// Linear solves and the LU / Cholesky families: linalg_cholesky_ex,
// cholesky, _cholesky_solve_helper, cholesky_inverse, triangular_solve,
// linalg_solve_triangular, linalg_lu_factor_ex, linalg_lu, lu_unpack,
// linalg_lu_solve, _linalg_solve_ex, linalg_inv_ex, _linalg_det,
// _linalg_slogdet.
//
// Cholesky and triangular solves are the StableHLO ops of those names. LU
// is a partial-pivot getf2 in one stablehlo.while over the columns (program
// size independent of n): each step picks the largest |a_ij| at or below the
// diagonal (first one on ties, like idamax), swaps rows with selects, and
// does the rank-1 update under a mask. Complex matrices run the same
// algorithms (pivoting on |re| + |im| as izamax does; Cholesky A = L L^H). `info` is computed on device, as
// LAPACK defines it (first zero pivot / first non-positive minor, 1-based).
#include "lowering/index_check.h"
#include "lowering/linalg_cplx.h"

namespace torch_tpu::lowering {
namespace la {
namespace {

constexpr auto kI32 = ElementType::kI32;

Value and_(Value a, Value b) { return hlo::binary("and", a, b); }

// Index of the largest value along dim 1 of [B, m] (first on ties); -1 if
// none compares greater than -inf (all NaN).
Value argmax_first(Value v, Value idx) {
  Builder& b = v.builder();
  Value init_v = hlo::constant(b, v.element(), -std::numeric_limits<double>::infinity());
  Value init_i = ci(b, -1);
  return hlo::reduce_multi({v, idx}, {init_v, init_i}, {1}, [](Builder&, const std::vector<Value>& a) {
    Value av = a[0], ai = a[1], cv = a[2], cidx = a[3];
    Value gt = hlo::compare(cv, av, "GT");
    Value eq = hlo::compare(cv, av, "EQ");
    Value lt_i = hlo::compare(cidx, ai, "LT");
    Value ai_neg = hlo::compare(ai, hlo::constant_int(av.builder(), kI32, 0), "LT");
    Value take = hlo::binary("or", gt, and_(eq, hlo::binary("or", lt_i, ai_neg)));
    return std::vector<Value>{hlo::select(take, cv, av), hlo::select(take, cidx, ai)};
  })[1];
}

}  // namespace

LuResult lu_factor(Value a) {
  Builder& b = a.builder();
  const Dims d = a.dims();
  int64_t B = d[0], m = d[1], n = d[2], k = std::min(m, n);
  ElementType e = a.element(), er = real_of(e);
  Value perm0 = iota_i(b, {B, m}, 1);
  Value piv0 = hlo::full(b, kI32, {B, k}, 0);
  Value info0 = hlo::full(b, kI32, {B}, 0);
  auto out = hlo::while_loop(
      {ci(b, 0), a, perm0, piv0, info0}, [&](const std::vector<Value>& s) { return hlo::compare(s[0], ci(b, k), "LT"); },
      [&](const std::vector<Value>& s) {
        Value j = s[0], A = s[1], perm = s[2], piv = s[3], info = s[4];
        Value R = row_idx(b, d), C = col_idx(b, d), jd = bc(j, d);
        Value colmask = hlo::compare(C, jd, "EQ");
        Value col = pick(A, colmask, 2);  // [B, m]
        Value ri = iota_i(b, {B, m}, 1), jm = bc(j, {B, m});
        Value cand = hlo::select(hlo::compare(ri, jm, "GE"), cabs1(col), hlo::full(b, er, {B, m}, -1));
        Value p = argmax_first(cand, ri);
        p = hlo::select(hlo::compare(p, bc(ci(b, 0), {B}), "LT"), bc(j, {B}), p);
        Value pd = hlo::broadcast_in_dim(p, d, {0});
        Value Rj = hlo::compare(R, jd, "EQ"), Rp = hlo::compare(R, pd, "EQ");
        Value rowj = pick(A, Rj, 1), rowp = pick(A, Rp, 1);  // [B, n]
        A = hlo::select(Rj, hlo::broadcast_in_dim(rowp, d, {0, 2}),
                        hlo::select(Rp, hlo::broadcast_in_dim(rowj, d, {0, 2}), A));
        Value pm = hlo::broadcast_in_dim(p, {B, m}, {0});
        Value mj = hlo::compare(ri, jm, "EQ"), mp = hlo::compare(ri, pm, "EQ");
        Value permj = pick(perm, mj, 1), permp = pick(perm, mp, 1);
        perm = hlo::select(mj, hlo::broadcast_in_dim(permp, {B, m}, {0}),
                           hlo::select(mp, hlo::broadcast_in_dim(permj, {B, m}, {0}), perm));
        Value pivot = pick(rowp, hlo::compare(iota_i(b, {B, n}, 1), bc(j, {B, n}), "EQ"), 1);  // [B]
        Value is0 = hlo::compare(cabs1(pivot), hlo::full(b, er, {B}, 0), "EQ");
        Value first = and_(is0, hlo::compare(info, hlo::full(b, kI32, {B}, 0), "EQ"));
        info = hlo::select(first, bc(hlo::add(j, ci(b, 1)), {B}), info);
        Value safe = hlo::select(is0, hlo::full(b, e, {B}, 1), pivot);
        Value colnew = pick(A, colmask, 2);
        Value below_m = hlo::compare(ri, jm, "GT");
        Value l = hlo::select(below_m, hlo::div(colnew, hlo::broadcast_in_dim(safe, {B, m}, {0})), colnew);
        Value ld = hlo::broadcast_in_dim(l, d, {0, 1}), ud = hlo::broadcast_in_dim(rowp, d, {0, 2});
        Value Rb = hlo::compare(R, jd, "GT");
        A = hlo::select(and_(Rb, hlo::compare(C, jd, "GT")), hlo::sub(A, hlo::mul(ld, ud)), A);
        A = hlo::select(and_(Rb, colmask), ld, A);
        Value ki = iota_i(b, {B, k}, 1);
        piv = hlo::select(hlo::compare(ki, bc(j, {B, k}), "EQ"),
                          hlo::broadcast_in_dim(hlo::add(p, bc(ci(b, 1), {B})), {B, k}, {0}), piv);
        return std::vector<Value>{hlo::add(j, ci(b, 1)), A, perm, piv, info};
      });
  return {out[1], out[3], out[2], out[4]};
}

Value perm_from_pivots(Value pivots, int64_t m) {
  Builder& b = pivots.builder();
  int64_t B = pivots.dim(0), k = pivots.dim(1);
  pivots = hlo::convert(pivots, kI32);
  auto out = hlo::while_loop(
      {ci(b, 0), iota_i(b, {B, m}, 1), pivots},
      [&](const std::vector<Value>& s) { return hlo::compare(s[0], ci(b, k), "LT"); },
      [&](const std::vector<Value>& s) {
        Value j = s[0], perm = s[1], piv = s[2];
        Value p = pick(piv, hlo::compare(iota_i(b, {B, k}, 1), bc(j, {B, k}), "EQ"), 1);
        p = hlo::sub(p, bc(ci(b, 1), {B}));
        Value ri = iota_i(b, {B, m}, 1);
        Value mj = hlo::compare(ri, bc(j, {B, m}), "EQ"), mp = hlo::compare(ri, hlo::broadcast_in_dim(p, {B, m}, {0}), "EQ");
        Value permj = pick(perm, mj, 1), permp = pick(perm, mp, 1);
        perm = hlo::select(mj, hlo::broadcast_in_dim(permp, {B, m}, {0}),
                           hlo::select(mp, hlo::broadcast_in_dim(permj, {B, m}, {0}), perm));
        return std::vector<Value>{hlo::add(j, ci(b, 1)), perm, piv};
      });
  return out[1];
}

Value lu_solve(Value lu, Value perm, Value rhs, bool adjoint) {
  Value P = perm_matrix(perm, rhs.element());
  if (!adjoint) {
    Value y = mm(P, rhs);
    y = hlo::triangular_solve(lu, y, true, true, true, false);
    return hlo::triangular_solve(lu, y, true, false, false, false);
  }
  Value z = tsolve(lu, rhs, true, false, false, true);
  z = tsolve(lu, z, true, true, true, true);
  return mm(mT(P), z);
}

}  // namespace la

namespace {
using namespace la;

// [batch..., r, c] -> [B, r, c]
Value flat3(Value a) {
  int64_t r = a.dim(a.rank() - 2), c = a.dim(a.rank() - 1);
  return hlo::reshape(a, {numel(batch_of(a.dims())), r, c});
}
Value unflat(Value a, const Dims& batch) {
  Dims tail(a.dims().begin() + 1, a.dims().end());
  return hlo::reshape(a, cat(batch, tail));
}

Value triangle(Value a, bool lower) { return lower ? tril(a) : triu(a); }

// Cholesky factor (lower) and info of [..., n, n], reading `lower`'s
// triangle. Column-by-column (potf2 order) in one while loop, so that `info`
// is LAPACK's: the order of the first leading minor that is not positive
// definite (stablehlo.cholesky turns the whole result into NaN instead).
std::pair<Value, Value> chol(Value a, bool lower) {
  Builder& b = a.builder();
  Dims batch = batch_of(a.dims());
  Value A = flat3(hermitize(a, lower));
  const Dims d = A.dims();
  int64_t B = d[0], n = d[1];
  ElementType e = A.element(), er = real_of(e);
  auto out = hlo::while_loop(
      {ci(b, 0), A, hlo::zeros_like(A), hlo::full(b, ElementType::kI32, {B}, 0)},
      [&](const std::vector<Value>& s) { return hlo::compare(s[0], ci(b, n), "LT"); },
      [&](const std::vector<Value>& s) {
        Value j = s[0], Am = s[1], L = s[2], info = s[3];
        Value R = row_idx(b, d), C = col_idx(b, d), jd = bc(j, d);
        Value lrow = pick(L, hlo::compare(R, jd, "EQ"), 1);  // [B, n]: L[j, :]
        Value dotp = hlo::reduce(hlo::mul(L, cj(hlo::broadcast_in_dim(lrow, d, {0, 2}))), {2}, hlo::ReduceKind::kSum);
        Value acol = pick(Am, hlo::compare(C, jd, "EQ"), 2);  // [B, n]: A[:, j]
        Value v = hlo::sub(acol, dotp);
        Value ri = iota_i(b, {B, n}, 1), jn = bc(j, {B, n});
        Value at = hlo::compare(ri, jn, "EQ");
        Value dj = hlo::real(pick(v, at, 1));  // [B], real
        Value bad = hlo::unary("not", hlo::compare(dj, hlo::full(b, er, {B}, 0), "GT"));
        Value first = hlo::binary("and", bad, hlo::compare(info, hlo::full(b, ElementType::kI32, {B}, 0), "EQ"));
        info = hlo::select(first, bc(hlo::add(j, ci(b, 1)), {B}), info);
        Value ljj = as_elem(hlo::unary("sqrt", dj), e);
        Value col = hlo::select(hlo::compare(ri, jn, "GT"), hlo::div(v, hlo::broadcast_in_dim(ljj, {B, n}, {0})),
                                hlo::select(at, hlo::broadcast_in_dim(ljj, {B, n}, {0}), hlo::full(b, e, {B, n}, 0)));
        L = hlo::select(hlo::compare(C, jd, "EQ"), hlo::broadcast_in_dim(col, d, {0, 1}), L);
        return std::vector<Value>{hlo::add(j, ci(b, 1)), Am, L, info};
      });
  Value L = out[2];
  // LAPACK leaves the columns from the failing one on unspecified; zero NaNs.
  L = hlo::select(not_nan(L), L, hlo::zeros_like(L));
  return {unflat(L, batch), hlo::reshape(out[3], batch)};
}

std::vector<int64_t> out_dims(LowerCtx& ctx, int i) {
  auto s = ctx.out_sizes(i);
  TORCH_CHECK(s.has_value(), ctx.op_name(), ": output shape unknown");
  return *s;
}

}  // namespace

TPU_LOWERING(linalg_cholesky_ex) {
  check_float_or_complex(ctx, "self");
  bool upper = ctx.bool_arg("upper");
  auto [L, info] = chol(ctx.tensor("self"), !upper);
  return {upper ? mH(L) : L, info};
}

TPU_LOWERING(cholesky) {
  check_float_or_complex(ctx, "self");
  bool upper = ctx.bool_arg("upper");
  Value L = chol(ctx.tensor("self"), !upper).first;
  return {upper ? mH(L) : L};
}

namespace {
// (L L^H)^-1 B or (U^H U)^-1 B with the factor's batch broadcast to B's.
Value chol_solve(Value f, Value rhs, bool upper) {
  bool lower = !upper;
  f = triangle(f, lower);
  // lower: L y = B, L^H x = y.  upper: U^H y = B, U x = y.
  Value y = tsolve(f, rhs, true, lower, false, upper);
  return tsolve(f, y, true, lower, false, lower);
}

std::pair<Value, Value> common_batch(Value a, Value rhs, const Dims& batch) {
  return {flat3(bcast_batch(a, batch)), flat3(bcast_batch(rhs, batch))};
}
}  // namespace

TPU_LOWERING(_cholesky_solve_helper) {
  check_float_or_complex(ctx, "self");
  Dims out = out_dims(ctx, 0);
  Dims batch = batch_of(out);
  auto [A, B] = common_batch(ctx.tensor("A"), ctx.tensor("self"), batch);
  return {unflat(chol_solve(A, B, ctx.bool_arg("upper")), batch)};
}

// CPU's and CUDA's cholesky_inverse (LAPACK/MAGMA potri) refuse a factor
// with an exactly zero diagonal element, naming the first one; computed
// through, it gives NaN and inf.
namespace {
void check_zero_diagonal(LowerCtx& ctx, Value F) {
  if (F.type().numel() == 0) return;
  Builder& b = F.builder();
  Value d = diagonal(F);  // [batch, n]
  int64_t n = d.dim(1);
  Value zero = hlo::compare(d, hlo::zeros_like(d), "EQ");
  Value pos = hlo::add(iota_i(b, d.dims(), 1), bc(ci(b, 1), d.dims()));  // 1-based, as LAPACK's info
  Value first = hlo::reduce(hlo::select(zero, pos, bc(ci(b, n + 1), d.dims())), {1}, hlo::ReduceKind::kMin);
  check_data(ctx, hlo::compare(first, bc(ci(b, n), first.dims()), "LE"),
             "cholesky_inverse: The diagonal element {} is zero, the inversion could not be completed because the "
             "input matrix is singular.",
             first, CheckError::kLinAlg);
}
}  // namespace

TPU_LOWERING(cholesky_inverse) {
  check_float_or_complex(ctx, "self");
  Value f = ctx.tensor("self");
  Dims batch = batch_of(f.dims());
  Value F = flat3(f);
  check_zero_diagonal(ctx, F);
  Value I = eye(ctx.b(), F.element(), F.dims());
  return {unflat(chol_solve(F, I, ctx.bool_arg("upper")), batch)};
}

TPU_LOWERING(triangular_solve) {
  check_float_or_complex(ctx, "self");
  Dims out0 = out_dims(ctx, 0), out1 = out_dims(ctx, 1);
  Dims batch = batch_of(out0);
  bool upper = ctx.bool_arg("upper"), unit = ctx.bool_arg("unitriangular");
  Value A = ctx.tensor("A");
  Value Ab = bcast_batch(A, batch_of(out1));
  auto [Af, Bf] = common_batch(A, ctx.tensor("self"), batch);
  Af = triangle(Af, !upper);
  // transpose is a plain transpose for complex too, as on CPU.
  Value X = hlo::triangular_solve(Af, Bf, true, !upper, unit, ctx.bool_arg("transpose"));
  return {unflat(X, batch), Ab};
}

TPU_LOWERING(linalg_solve_triangular) {
  check_float_or_complex(ctx, "self");
  Dims out = out_dims(ctx, 0);
  Dims batch = batch_of(out);
  bool upper = ctx.bool_arg("upper"), unit = ctx.bool_arg("unitriangular"), left = ctx.bool_arg("left");
  auto [Af, Bf] = common_batch(ctx.tensor("self"), ctx.tensor("B"), batch);
  Af = triangle(Af, !upper);
  return {unflat(hlo::triangular_solve(Af, Bf, left, !upper, unit, false), batch)};
}

TPU_LOWERING(linalg_lu_factor_ex) {
  check_float_or_complex(ctx, "A");
  TORCH_CHECK(!ctx.has("pivot") || ctx.bool_arg("pivot"),
              "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  Value A = ctx.tensor("A");
  Dims batch = batch_of(A.dims());
  LuResult r = lu_factor(flat3(A));
  int64_t k = r.pivots.dim(1);
  return {unflat(r.lu, batch), hlo::reshape(r.pivots, cat(batch, {k})), hlo::reshape(r.info, batch)};
}

TPU_LOWERING(linalg_lu) {
  check_float_or_complex(ctx, "A");
  TORCH_CHECK(ctx.bool_arg("pivot"), "linalg.lu: LU without pivoting is not implemented on the CPU");
  Value A = ctx.tensor("A");
  Dims batch = batch_of(A.dims());
  int64_t m = A.dim(A.rank() - 2), n = A.dim(A.rank() - 1), k = std::min(m, n);
  LuResult r = lu_factor(flat3(A));
  int64_t B = r.lu.dim(0);
  Value L = hlo::slice(r.lu, {0, 0, 0}, {B, m, k});
  L = hlo::add(tril(L, -1), eye(ctx.b(), L.element(), L.dims()));
  Value U = triu(hlo::slice(r.lu, {0, 0, 0}, {B, k, n}));
  Value P = mT(perm_matrix(r.perm, A.element()));
  return {unflat(P, batch), unflat(L, batch), unflat(U, batch)};
}

TPU_LOWERING(lu_unpack) {
  Value LU = ctx.tensor("LU_data");
  Dims batch = batch_of(LU.dims());
  int64_t m = LU.dim(LU.rank() - 2), n = LU.dim(LU.rank() - 1), k = std::min(m, n);
  Value F = flat3(LU);
  int64_t B = F.dim(0);
  std::vector<Value> res;
  if (ctx.bool_arg("unpack_pivots")) {
    Value piv = hlo::reshape(ctx.tensor("LU_pivots"), {B, k});
    res.push_back(unflat(mT(perm_matrix(perm_from_pivots(piv, m), LU.element())), batch));
  } else {
    res.push_back(hlo::full(ctx.b(), LU.element(), out_dims(ctx, 0), 0));
  }
  if (ctx.bool_arg("unpack_data")) {
    Value L = hlo::slice(F, {0, 0, 0}, {B, m, k});
    L = hlo::add(tril(L, -1), eye(ctx.b(), L.element(), L.dims()));
    res.push_back(unflat(L, batch));
    res.push_back(unflat(triu(hlo::slice(F, {0, 0, 0}, {B, k, n})), batch));
  } else {
    res.push_back(hlo::full(ctx.b(), LU.element(), out_dims(ctx, 1), 0));
    res.push_back(hlo::full(ctx.b(), LU.element(), out_dims(ctx, 2), 0));
  }
  return res;
}

namespace {
// Solves op(A) X = B (left) or X op(A) = B from a packed LU and its row order,
// broadcasting batches to `batch`. rhs is [batch'..., n, k] (left) or
// [batch'..., k, n] (right).
Value solve_with_lu(Value lu, Value perm, Value rhs, bool left, bool adjoint, const Dims& batch) {
  int64_t n = lu.dim(lu.rank() - 1);
  Value LUf = flat3(bcast_batch(lu, batch));
  Dims pb = cat(batch, {n});
  Value Pf = hlo::reshape(perm.dims() == pb ? perm : hlo::broadcast_to(perm, pb), {numel(batch), n});
  Value R = flat3(bcast_batch(rhs, batch));
  if (left) return unflat(lu_solve(LUf, Pf, R, adjoint), batch);
  // X op(A) = B  <=>  op(A)^H X^H = B^H.
  return unflat(mH(lu_solve(LUf, Pf, mH(R), !adjoint)), batch);
}
}  // namespace

TPU_LOWERING(linalg_lu_solve) {
  check_float_or_complex(ctx, "LU");
  Value LU = ctx.tensor("LU");
  Dims lb = batch_of(LU.dims());
  int64_t n = LU.dim(LU.rank() - 1);
  Value piv = hlo::reshape(ctx.tensor("pivots"), {numel(lb), n});
  Value perm = hlo::reshape(perm_from_pivots(piv, n), cat(lb, {n}));
  Dims out = out_dims(ctx, 0);
  return {solve_with_lu(LU, perm, ctx.tensor("B"), ctx.bool_arg("left"), ctx.bool_arg("adjoint"), batch_of(out))};
}

// _linalg_det and _linalg_slogdet factor A^T when A is real and
// contiguous (as the CPU kernels do, to avoid a copy): their LU / pivots
// outputs feed the backward formulas, which assume that choice.
namespace {
// (CPU limits this to real matrices.)
bool use_a_t(LowerCtx& ctx) { return ctx.tensor_arg("A").is_contiguous() && !ctx.tensor_arg("A").is_complex(); }
Value factored(LowerCtx& ctx) {
  Value A = ctx.tensor("A");
  return use_a_t(ctx) ? mT(A) : A;
}
}  // namespace

TPU_LOWERING(_linalg_solve_ex) {
  check_float_or_complex(ctx, "A");
  Value A = ctx.tensor("A"), Bv = ctx.tensor("B");
  bool left = ctx.bool_arg("left"), adj = false;  // CPU factors A itself here
  Dims ab = batch_of(A.dims());
  int64_t n = A.dim(A.rank() - 1);
  LuResult r = lu_factor(flat3(adj ? mT(A) : A));
  Value lu = unflat(r.lu, ab);
  Value perm = hlo::reshape(r.perm, cat(ab, {n}));
  Dims out = out_dims(ctx, 0);
  bool vector_case = Bv.rank() == 1 || (Bv.rank() == A.rank() - 1 && Bv.dims() == Dims(A.dims().begin(), A.dims().end() - 1));
  Value X;
  if (vector_case) {
    Dims bd = Bv.dims();
    bd.insert(left ? bd.end() : bd.end() - 1, 1);
    Value Bm = hlo::reshape(Bv, bd);
    Dims batch(out.begin(), out.end() - 1);
    X = hlo::reshape(solve_with_lu(lu, perm, Bm, left, adj, batch), out);
  } else {
    X = solve_with_lu(lu, perm, Bv, left, adj, batch_of(out));
  }
  return {X, lu, hlo::reshape(r.pivots, cat(ab, {n})), hlo::reshape(r.info, ab)};
}

TPU_LOWERING(linalg_inv_ex) {
  check_float_or_complex(ctx, "A");
  Value A = ctx.tensor("A");
  Dims ab = batch_of(A.dims());
  LuResult r = lu_factor(flat3(A));
  Value I = eye(ctx.b(), A.element(), r.lu.dims());
  return {unflat(lu_solve(r.lu, r.perm, I, false), ab), hlo::reshape(r.info, ab)};
}

namespace {
// (-1)^(number of row swaps) as [B] of the element type.
Value pivot_sign(Value pivots, ElementType e) {
  Builder& b = pivots.builder();
  Value want = hlo::add(iota_i(b, pivots.dims(), 1), bc(ci(b, 1), pivots.dims()));
  Value swapped = hlo::compare(pivots, want, "NE");
  Value cnt = hlo::reduce(hlo::select(swapped, bc(ci(b, 1), pivots.dims()), bc(ci(b, 0), pivots.dims())), {1},
                          hlo::ReduceKind::kSum);
  Value odd = hlo::compare(hlo::binary("and", cnt, bc(ci(b, 1), cnt.dims())), bc(ci(b, 1), cnt.dims()), "EQ");
  return hlo::select(odd, hlo::full(b, e, cnt.dims(), -1), hlo::full(b, e, cnt.dims(), 1));
}
}  // namespace

TPU_LOWERING(_linalg_det) {
  check_float_or_complex(ctx, "A");
  Value A = factored(ctx);
  Dims ab = batch_of(A.dims());
  int64_t n = A.dim(A.rank() - 1);
  LuResult r = lu_factor(flat3(A));
  Value det = hlo::reduce(diagonal(r.lu), {1}, hlo::ReduceKind::kProd);
  det = hlo::mul(det, pivot_sign(r.pivots, det.element()));
  return {hlo::reshape(det, ab), unflat(r.lu, ab), hlo::reshape(r.pivots, cat(ab, {n}))};
}

TPU_LOWERING(_linalg_slogdet) {
  check_float_or_complex(ctx, "A");
  Value A = factored(ctx);
  Dims ab = batch_of(A.dims());
  int64_t n = A.dim(A.rank() - 1);
  LuResult r = lu_factor(flat3(A));
  Value dg = diagonal(r.lu);
  Value sign = hlo::reduce(hlo::unary("sign", dg), {1}, hlo::ReduceKind::kProd);
  sign = hlo::mul(sign, pivot_sign(r.pivots, sign.element()));
  Value logabs = hlo::reduce(hlo::unary("log", hlo::unary("abs", dg)), {1}, hlo::ReduceKind::kSum);
  return {hlo::reshape(sign, ab), hlo::reshape(logabs, ab), unflat(r.lu, ab), hlo::reshape(r.pivots, cat(ab, {n}))};
}

}  // namespace torch_tpu::lowering
