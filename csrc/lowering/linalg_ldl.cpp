// linalg_ldl_factor_ex: symmetric indefinite LDL^T with Bunch-Kaufman
// pivoting, step for step as LAPACK's ?sytf2 (lower) does it, so LD, the
// pivots (LAPACK's 1-based ipiv: k for 1x1 blocks, -k twice for 2x2 blocks)
// and info match CPU.
//
// One stablehlo.while over the steps; every batch item keeps its own column
// k (a step eliminates one or two columns). The not-yet-eliminated trailing
// block is kept full and symmetric (rebuilt from its lower triangle after
// every update, where LAPACK's arithmetic happens), so the row swaps and the
// row maxima LAPACK reads from the lower triangle are plain row/column
// operations here. Columns already eliminated are never permuted, as in
// LAPACK. Dynamic positions are one-hot masks, so a step costs O(n^2).
// Complex symmetric matrices (hermitian=False) are ?sytf2 too (zsytf2):
// the same arithmetic, with magnitudes |re| + |im| as LAPACK's CABS1.
#include <c10/util/Exception.h>

#include <cmath>

#include "lowering/linalg_cplx.h"

namespace torch_tpu::lowering {
namespace {

constexpr auto kI32 = ElementType::kI32;
constexpr auto kI64 = ElementType::kI64;
constexpr auto kPred = ElementType::kPred;

Value and_(Value a, Value b) { return hlo::binary("and", a, b); }
Value or_(Value a, Value b) { return hlo::binary("or", a, b); }
Value not_(Value a) { return hlo::unary("not", a); }

// x[b, ...] summed where `mask` holds along `dim` (exactly one position does).
Value pick(Value x, Value mask, int64_t dim) {
  return hlo::reduce(hlo::select(mask, x, hlo::zeros_like(x)), {dim}, hlo::ReduceKind::kSum);
}

struct Ldl {
  Builder& b;
  int64_t B, n;
  ElementType e, er;  // element type, its real type (magnitudes)
  Dims d3() const { return {B, n, n}; }
  Dims d2() const { return {B, n}; }
  Value bc2(Value v) const { return hlo::broadcast_in_dim(v, d2(), {0}); }  // [B] -> [B, n]
  Value bc3(Value v) const { return hlo::broadcast_in_dim(v, d3(), {0}); }  // [B] -> [B, n, n]
  Value rows() const { return hlo::iota(b, kI64, d3(), 1); }
  Value cols() const { return hlo::iota(b, kI64, d3(), 2); }
  Value idx() const { return hlo::iota(b, kI64, d2(), 1); }
  Value num(double v, const Dims& dims) const { return hlo::full(b, e, dims, v); }
  Value rnum(double v, const Dims& dims) const { return hlo::full(b, er, dims, v); }
  Value ints(double v, const Dims& dims) const { return hlo::full(b, kI64, dims, v); }
  // Column c[b] of S as [B, n].
  Value column(Value S, Value c) const { return pick(S, hlo::compare(cols(), bc3(c), "EQ"), 2); }
  Value row(Value S, Value r) const { return pick(S, hlo::compare(rows(), bc3(r), "EQ"), 1); }
  Value at(Value v, Value i) const { return pick(v, hlo::compare(idx(), bc2(i), "EQ"), 1); }  // v[b, i[b]]
  // Largest |v| where `mask`, and the first index holding it (-1 and 0 if none).
  std::pair<Value, Value> max_abs(Value v, Value mask) const {
    Value a = hlo::select(mask, la::cabs1(v), rnum(-1, d2()));
    Value m = hlo::reduce(a, {1}, hlo::ReduceKind::kMax);
    Value hit = and_(mask, hlo::compare(a, bc2(m), "EQ"));
    Value i = hlo::reduce(hlo::select(hit, idx(), ints(n, d2())), {1}, hlo::ReduceKind::kMin);
    return {m, i};
  }

  std::vector<Value> step(const std::vector<Value>& s) const {
    Value S = s[0], piv = s[1], info = s[2], k = s[3];
    Dims B1 = {B};
    Value active = hlo::compare(k, ints(n, B1), "LT");
    Value kc = hlo::min(k, ints(n - 1, B1));  // a valid column for finished items
    Value R = rows(), C = cols(), I = idx();
    Value alpha = rnum((1.0 + std::sqrt(17.0)) / 8.0, B1);
    Value diag = pick(S, hlo::compare(R, C, "EQ"), 2);
    Value absakk = la::cabs1(at(diag, kc));
    auto [colmax, imax] = max_abs(column(S, kc), hlo::compare(I, bc2(kc), "GT"));
    Value none = hlo::compare(colmax, rnum(0, B1), "LT");  // k is the last column
    colmax = hlo::select(none, rnum(0, B1), colmax);
    imax = hlo::select(none, kc, imax);
    Value zero = or_(hlo::compare(hlo::max(absakk, colmax), rnum(0, B1), "EQ"), hlo::compare(absakk, absakk, "NE"));
    // Row imax of the trailing block without its diagonal.
    Value rmask = and_(hlo::compare(I, bc2(kc), "GE"), hlo::compare(I, bc2(imax), "NE"));
    Value rowmax = max_abs(column(S, imax), rmask).first;
    Value keep1 = hlo::compare(absakk, hlo::mul(alpha, colmax), "GE");
    Value keep2 = hlo::compare(absakk, hlo::mul(hlo::mul(alpha, colmax), hlo::div(colmax, rowmax)), "GE");
    Value swap1 = hlo::compare(la::cabs1(at(diag, imax)), hlo::mul(alpha, rowmax), "GE");
    Value no_swap = or_(zero, or_(keep1, keep2));
    Value kp = hlo::select(no_swap, kc, imax);
    Value two = and_(not_(no_swap), not_(swap1));
    Value kstep = hlo::select(two, ints(2, B1), ints(1, B1));
    Value kk = hlo::sub(hlo::add(kc, kstep), ints(1, B1));
    Value go = and_(active, not_(zero));

    // Swap kk <-> kp inside the trailing block [k:, k:].
    Value kd = bc3(kc), kkd = bc3(kk), kpd = bc3(kp), god = bc3(go);
    Value Rt = hlo::compare(R, kd, "GE"), Ct = hlo::compare(C, kd, "GE");
    Value rkk = row(S, kk), rkp = row(S, kp);
    Value S1 = hlo::select(and_(hlo::compare(R, kkd, "EQ"), Ct), hlo::broadcast_in_dim(rkp, d3(), {0, 2}),
                           hlo::select(and_(hlo::compare(R, kpd, "EQ"), Ct), hlo::broadcast_in_dim(rkk, d3(), {0, 2}), S));
    Value ckk = column(S1, kk), ckp = column(S1, kp);
    S1 = hlo::select(and_(hlo::compare(C, kkd, "EQ"), Rt), hlo::broadcast_in_dim(ckp, d3(), {0, 1}),
                     hlo::select(and_(hlo::compare(C, kpd, "EQ"), Rt), hlo::broadcast_in_dim(ckk, d3(), {0, 1}), S1));

    // 1x1 step: rank-1 update of [k+1:, k+1:], column k scaled by 1/d.
    Value diag1 = pick(S1, hlo::compare(R, C, "EQ"), 2);
    Value x = hlo::select(hlo::compare(I, bc2(kc), "GT"), column(S1, kc), num(0, d2()));
    Value d11 = hlo::div(num(1, B1), at(diag1, kc));
    Value negd = hlo::broadcast_in_dim(hlo::neg(d11), d2(), {0});
    Value xi = hlo::broadcast_in_dim(x, d3(), {0, 1});
    Value tj = hlo::broadcast_in_dim(hlo::mul(negd, x), d3(), {0, 2});
    Value in1 = and_(hlo::compare(R, kd, "GT"), hlo::compare(C, kd, "GT"));
    Value S_one = hlo::select(in1, hlo::add(S1, hlo::mul(xi, tj)), S1);
    Value colk = hlo::compare(C, kd, "EQ"), below1 = hlo::compare(R, kd, "GT");
    S_one = hlo::select(and_(colk, below1), hlo::broadcast_in_dim(hlo::mul(x, hlo::broadcast_in_dim(d11, d2(), {0})), d3(), {0, 1}),
                        S_one);

    // 2x2 step on columns k, k+1: rank-2 update of [k+2:, k+2:].
    Value k1 = hlo::add(kc, ints(1, B1));
    Value k1c = hlo::min(k1, ints(n - 1, B1));
    Value c0 = column(S1, kc), c1 = column(S1, k1c);
    Value d21 = at(c0, k1c);
    Value e11 = hlo::div(at(diag1, k1c), d21), e22 = hlo::div(at(diag1, kc), d21);
    Value t = hlo::div(num(1, B1), hlo::sub(hlo::mul(e11, e22), num(1, B1)));
    Value f21 = hlo::div(t, d21);
    auto b2 = [&](Value v) { return hlo::broadcast_in_dim(v, d2(), {0}); };
    Value below2v = hlo::compare(I, bc2(k1c), "GT");
    Value ck = hlo::select(below2v, c0, num(0, d2())), ck1 = hlo::select(below2v, c1, num(0, d2()));
    Value wk = hlo::mul(b2(f21), hlo::sub(hlo::mul(b2(e11), ck), ck1));
    Value wkp1 = hlo::mul(b2(f21), hlo::sub(hlo::mul(b2(e22), ck1), ck));
    Value k1d = bc3(k1c);
    Value in2 = and_(hlo::compare(R, k1d, "GT"), hlo::compare(C, k1d, "GT"));
    Value upd = hlo::sub(hlo::sub(S1, hlo::mul(hlo::broadcast_in_dim(ck, d3(), {0, 1}), hlo::broadcast_in_dim(wk, d3(), {0, 2}))),
                         hlo::mul(hlo::broadcast_in_dim(ck1, d3(), {0, 1}), hlo::broadcast_in_dim(wkp1, d3(), {0, 2})));
    Value S_two = hlo::select(in2, upd, S1);
    Value below2 = hlo::compare(R, k1d, "GT");
    S_two = hlo::select(and_(colk, below2), hlo::broadcast_in_dim(wk, d3(), {0, 1}), S_two);
    S_two = hlo::select(and_(hlo::compare(C, k1d, "EQ"), below2), hlo::broadcast_in_dim(wkp1, d3(), {0, 1}), S_two);

    Value S2 = hlo::select(bc3(two), S_two, S_one);
    // Trailing block [k+kstep:, k+kstep:] made symmetric again from its lower triangle.
    Value ks = bc3(hlo::add(kc, kstep));
    Value upper = and_(and_(hlo::compare(R, ks, "GE"), hlo::compare(C, ks, "GE")), hlo::compare(R, C, "LT"));
    S2 = hlo::select(upper, hlo::transpose(S2, {0, 2, 1}), S2);
    S = hlo::select(god, S2, S);

    // Pivots (1-based) and info.
    Value p1 = hlo::convert(hlo::add(kp, ints(1, B1)), kI32);
    Value pv = hlo::select(two, hlo::neg(p1), p1);
    Value at_k = and_(hlo::compare(I, bc2(kc), "EQ"), bc2(active));
    Value at_k1 = and_(and_(hlo::compare(I, bc2(k1), "EQ"), bc2(active)), bc2(two));
    piv = hlo::select(or_(at_k, at_k1), hlo::broadcast_in_dim(pv, d2(), {0}), piv);
    Value first = and_(and_(active, zero), hlo::compare(info, hlo::full(b, kI32, B1, 0), "EQ"));
    info = hlo::select(first, hlo::convert(hlo::add(kc, ints(1, B1)), kI32), info);
    k = hlo::select(active, hlo::add(k, kstep), k);
    return {S, piv, info, k};
  }
};

}  // namespace

// linalg_ldl_factor_ex(self, *, hermitian, check_errors) -> (LD, pivots, info)
TPU_LOWERING(linalg_ldl_factor_ex) {
  const at::Tensor& a = ctx.tensor_arg("self");
  TORCH_CHECK(a.dim() >= 2 && a.size(-1) == a.size(-2), "torch.linalg.ldl_factor_ex: A must be batches of square "
              "matrices, but they are ", a.size(-2), " by ", a.size(-1), " matrices");
  TORCH_CHECK(a.scalar_type() == at::kFloat || a.scalar_type() == at::kDouble || a.scalar_type() == at::kComplexFloat ||
                  a.scalar_type() == at::kComplexDouble,
              "torch.linalg.ldl_factor_ex: on tpu only float32, float64, complex64 and complex128 are supported, got ",
              a.scalar_type());
  TORCH_CHECK(!a.is_complex() || !ctx.bool_arg("hermitian"),
              "torch.linalg.ldl_factor_ex: hermitian=True with complex input (LAPACK's ?hetrf) is not supported on "
              "tpu; complex symmetric input (hermitian=False) is");
  TORCH_CHECK(!ctx.bool_arg("check_errors"),
              "torch.linalg.ldl_factor_ex: check_errors=True is not supported on tpu (it would need a sync); "
              "check the returned info instead");
  int64_t n = a.size(-1), B = n == 0 ? 0 : a.numel() / (n * n);
  Dims batch(a.sizes().begin(), a.sizes().end() - 2);
  Builder& b = ctx.b();
  ElementType e = element_type(a.scalar_type());
  Dims ld_dims = a.sizes().vec(), piv_dims = batch;
  piv_dims.push_back(n);
  if (B == 0 || n == 0)
    return {hlo::full(b, e, ld_dims, 0), hlo::full(b, kI32, piv_dims, 0), hlo::full(b, kI32, batch, 0)};
  ElementType er = hlo::is_complex(e) ? hlo::complex_component(e) : e;
  Ldl L{b, B, n, e, er};
  Value A = hlo::reshape(ctx.tensor("self"), {B, n, n});
  // Only the lower triangle is read, as LAPACK does.
  Value lower = hlo::compare(L.rows(), L.cols(), "GE");
  A = hlo::select(lower, A, hlo::zeros_like(A));
  Value S = hlo::select(lower, A, hlo::transpose(A, {0, 2, 1}));
  auto out = hlo::while_loop(
      {S, hlo::full(b, kI32, {B, n}, 0), hlo::full(b, kI32, {B}, 0), hlo::full(b, kI64, {B}, 0)},
      [&](const std::vector<Value>& s) {
        Value left = hlo::compare(s[3], hlo::full(s[3].builder(), kI64, {B}, static_cast<double>(n)), "LT");
        return hlo::reduce(left, {0}, hlo::ReduceKind::kOr);
      },
      [&](const std::vector<Value>& s) {
        Ldl l{s[0].builder(), B, n, e, er};
        return l.step(s);
      });
  Value LD = hlo::select(lower, out[0], hlo::zeros_like(out[0]));
  return {hlo::reshape(LD, ld_dims), hlo::reshape(out[1], piv_dims), hlo::reshape(out[2], batch)};
}

}  // namespace torch_tpu::lowering

// linalg_ldl_solve(LD, pivots, B, *, hermitian): LAPACK ?sytrs (lower) on
// the factorization above: apply the interchanges and solve L D Y = B
// forward (1x1 and 2x2 blocks), then L^T X = Y backward, undoing the
// interchanges. Two stablehlo.while loops with a column per batch item.
namespace torch_tpu::lowering {
namespace {

struct LdlSolve {
  Builder& b;
  int64_t B, n, m;
  ElementType e;
  Value idx() const { return hlo::iota(b, kI64, {B, n}, 1); }
  Value bc(Value v) const { return hlo::broadcast_in_dim(v, {B, n}, {0}); }
  Value ints(double v) const { return hlo::full(b, kI64, {B}, v); }
  // Row r[b] of X [B, n, m] as [B, m].
  Value row(Value X, Value r) const {
    Value mask = hlo::broadcast_in_dim(hlo::compare(idx(), bc(r), "EQ"), {B, n, m}, {0, 1});
    return pick(X, mask, 1);
  }
  Value set_row(Value X, Value r, Value v, Value when) const {
    Value mask = hlo::broadcast_in_dim(and_(hlo::compare(idx(), bc(r), "EQ"), bc(when)), {B, n, m}, {0, 1});
    return hlo::select(mask, hlo::broadcast_in_dim(v, {B, n, m}, {0, 2}), X);
  }
  Value swap(Value X, Value r1, Value r2, Value when) const {
    Value a = row(X, r1), c = row(X, r2);
    return set_row(set_row(X, r1, c, when), r2, a, when);
  }
  // LD[b, :, c[b]] as [B, n].
  Value column(Value LD, Value c) const {
    Value mask = hlo::compare(hlo::iota(b, kI64, {B, n, n}, 2), hlo::broadcast_in_dim(c, {B, n, n}, {0}), "EQ");
    return pick(LD, mask, 2);
  }
  Value at(Value v, Value i) const { return pick(v, hlo::compare(idx(), bc(i), "EQ"), 1); }
  // X - outer(col masked to rows > after, X[r]).
  Value eliminate(Value X, Value col, Value after, Value r, Value when) const {
    Value c = hlo::select(and_(hlo::compare(idx(), bc(after), "GT"), bc(when)), col, hlo::zeros_like(col));
    return hlo::sub(X, hlo::mul(hlo::broadcast_in_dim(c, {B, n, m}, {0, 1}), hlo::broadcast_in_dim(row(X, r), {B, n, m}, {0, 2})));
  }
  // sum over rows i > after of col[i] * X[i] as [B, m].
  Value dot_below(Value X, Value col, Value after) const {
    Value c = hlo::select(hlo::compare(idx(), bc(after), "GT"), col, hlo::zeros_like(col));
    return hlo::reduce(hlo::mul(hlo::broadcast_in_dim(c, {B, n, m}, {0, 1}), X), {1}, hlo::ReduceKind::kSum);
  }
};

}  // namespace

TPU_LOWERING(linalg_ldl_solve) {
  const at::Tensor& ld = ctx.tensor_arg("LD");
  const at::Tensor& bt = ctx.tensor_arg("B");
  TORCH_CHECK(ld.scalar_type() == at::kFloat || ld.scalar_type() == at::kDouble ||
                  ld.scalar_type() == at::kComplexFloat || ld.scalar_type() == at::kComplexDouble,
              "torch.linalg.ldl_solve: on tpu only float32, float64, complex64 and complex128 are supported, got ",
              ld.scalar_type());
  TORCH_CHECK(!ld.is_complex() || !ctx.bool_arg("hermitian"),
              "torch.linalg.ldl_solve: hermitian=True with complex input (LAPACK's ?hetrs) is not supported on tpu; "
              "complex symmetric input (hermitian=False) is");
  auto out = ctx.out_sizes();
  TORCH_CHECK(out.has_value(), "torch.linalg.ldl_solve: no output shape");
  Dims od = *out;
  int64_t n = od[od.size() - 2], m = od.back();
  Dims batch(od.begin(), od.end() - 2);
  int64_t B = 1;
  for (auto s : batch) B *= s;
  Builder& b = ctx.b();
  ElementType e = element_type(ld.scalar_type());
  if (B == 0 || n == 0 || m == 0) return {hlo::full(b, e, od, 0)};
  Dims ldd = batch, pd = batch;
  ldd.push_back(n);
  ldd.push_back(n);
  pd.push_back(n);
  Value LD = hlo::reshape(hlo::broadcast_to(ctx.tensor("LD"), ldd), {B, n, n});
  Value P = hlo::reshape(hlo::broadcast_to(hlo::convert(ctx.tensor("pivots"), kI64), pd), {B, n});
  Value X = hlo::reshape(hlo::broadcast_to(hlo::convert(ctx.tensor("B"), e), od), {B, n, m});
  (void)bt;
  // Forward: L D Y = P B.
  auto fwd = hlo::while_loop(
      {X, hlo::full(b, kI64, {B}, 0)},
      [&](const std::vector<Value>& s) {
        return hlo::reduce(hlo::compare(s[1], hlo::full(s[1].builder(), kI64, {B}, static_cast<double>(n)), "LT"), {0},
                           hlo::ReduceKind::kOr);
      },
      [&](const std::vector<Value>& s) {
        LdlSolve L{s[0].builder(), B, n, m, e};
        Value X = s[0], k = s[1];
        Value active = hlo::compare(k, L.ints(n), "LT");
        Value kc = hlo::min(k, L.ints(n - 1));
        Value k1 = hlo::min(hlo::add(kc, L.ints(1)), L.ints(n - 1));
        Value p = L.at(P, kc);
        Value one = and_(active, hlo::compare(p, L.ints(0), "GT"));
        Value two = and_(active, not_(one));
        Value kp = hlo::select(one, hlo::sub(p, L.ints(1)), hlo::sub(hlo::neg(p), L.ints(1)));
        kp = hlo::clamp(hlo::constant_int(L.b, kI64, 0), kp, hlo::constant_int(L.b, kI64, n - 1));
        Value c0 = L.column(LD, kc), c1 = L.column(LD, k1);
        Value diag0 = L.at(c0, kc);
        // 1x1 block.
        Value X1 = L.swap(X, kc, kp, one);
        X1 = L.eliminate(X1, c0, kc, kc, one);
        Value inv = hlo::div(hlo::full(L.b, e, {B}, 1), diag0);
        X1 = L.set_row(X1, kc, hlo::mul(L.row(X1, kc), hlo::broadcast_in_dim(inv, {B, m}, {0})), one);
        // 2x2 block.
        Value X2 = L.swap(X, k1, kp, two);
        X2 = L.eliminate(X2, c0, k1, kc, two);
        X2 = L.eliminate(X2, c1, k1, k1, two);
        Value akm1k = L.at(c0, k1);
        Value akm1 = hlo::div(diag0, akm1k), ak = hlo::div(L.at(c1, k1), akm1k);
        Value denom = hlo::sub(hlo::mul(akm1, ak), hlo::full(L.b, e, {B}, 1));
        auto bm = [&](Value v) { return hlo::broadcast_in_dim(v, {B, m}, {0}); };
        Value bkm1 = hlo::div(L.row(X2, kc), bm(akm1k)), bk = hlo::div(L.row(X2, k1), bm(akm1k));
        Value y0 = hlo::div(hlo::sub(hlo::mul(bm(ak), bkm1), bk), bm(denom));
        Value y1 = hlo::div(hlo::sub(hlo::mul(bm(akm1), bk), bkm1), bm(denom));
        X2 = L.set_row(L.set_row(X2, kc, y0, two), k1, y1, two);
        Value Xn = hlo::select(hlo::broadcast_in_dim(one, {B, n, m}, {0}), X1,
                               hlo::select(hlo::broadcast_in_dim(two, {B, n, m}, {0}), X2, X));
        Value step = hlo::select(one, L.ints(1), L.ints(2));
        return std::vector<Value>{Xn, hlo::select(active, hlo::add(k, step), k)};
      });
  // Backward: L^T X = Y, then the interchanges in reverse.
  auto bwd = hlo::while_loop(
      {fwd[0], hlo::full(b, kI64, {B}, static_cast<double>(n - 1))},
      [&](const std::vector<Value>& s) {
        return hlo::reduce(hlo::compare(s[1], hlo::full(s[1].builder(), kI64, {B}, 0), "GE"), {0}, hlo::ReduceKind::kOr);
      },
      [&](const std::vector<Value>& s) {
        LdlSolve L{s[0].builder(), B, n, m, e};
        Value X = s[0], k = s[1];
        Value active = hlo::compare(k, L.ints(0), "GE");
        Value kc = hlo::max(k, L.ints(0));
        Value km1 = hlo::max(hlo::sub(kc, L.ints(1)), L.ints(0));
        Value p = L.at(P, kc);
        Value one = and_(active, hlo::compare(p, L.ints(0), "GT"));
        Value two = and_(active, not_(one));
        Value kp = hlo::select(one, hlo::sub(p, L.ints(1)), hlo::sub(hlo::neg(p), L.ints(1)));
        kp = hlo::clamp(hlo::constant_int(L.b, kI64, 0), kp, hlo::constant_int(L.b, kI64, n - 1));
        Value c0 = L.column(LD, kc), cm = L.column(LD, km1);
        Value rk = hlo::sub(L.row(X, kc), L.dot_below(X, c0, kc));
        Value rkm1 = hlo::sub(L.row(X, km1), L.dot_below(X, cm, kc));
        Value Xn = L.set_row(X, kc, rk, active);
        Xn = L.set_row(Xn, km1, rkm1, two);
        Xn = L.swap(Xn, kc, kp, active);
        Value step = hlo::select(one, L.ints(1), L.ints(2));
        return std::vector<Value>{Xn, hlo::select(active, hlo::sub(k, step), k)};
      });
  return {hlo::reshape(bwd[0], od)};
}

}  // namespace torch_tpu::lowering
