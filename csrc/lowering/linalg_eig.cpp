// Eigen-decomposition of general (non-symmetric) matrices: linalg_eig and
// _linalg_eigvals (what torch.linalg.eigvals calls). XLA has no eig op, so:
//  - Schur form by the shifted QR algorithm in complex arithmetic: each step
//    factors A - mu I of the active (not yet deflated) leading block with
//    Householder reflections (inner stablehlo.while), then A <- Q^H A Q and
//    Z <- Z Q. mu is the Wilkinson shift of the active block's trailing 2x2
//    (an exceptional shift after 10 steps without progress). When the active
//    block's last row is negligible it is deflated. The active size is per
//    batch item; finished items take identity steps.
//  - Eigenvalues: diag(T). Eigenvectors: back-substitution on T (LAPACK's
//    trevc: a tiny pivot is replaced by eps * |T|), mapped back by Z,
//    normalised to unit norm with their largest component real (as geev).
// The eigenvalue order is the Schur form's, which need not be LAPACK's.
// Real inputs are computed as complex (eig of a real matrix is complex).
#include "hlo/complex_ops.h"
#include "lowering/linalg_util.h"

namespace torch_tpu::lowering {
namespace {
using namespace la;

Value and_(Value a, Value b) { return hlo::binary("and", a, b); }
Value or_(Value a, Value b) { return hlo::binary("or", a, b); }

// |z|^2 (real).
Value abs2(Value z) {
  Value re = hlo::real(z), im = hlo::imag(z);
  return hlo::add(hlo::mul(re, re), hlo::mul(im, im));
}

// [B] -> [B, n, n] (the same value across each matrix).
Value bvec3(Value v, const Dims& d) { return hlo::broadcast_in_dim(v, d, {0}); }

// Conjugate transpose of [B, r, c].
Value mH(Value a) { return hlo::conj(hlo::transpose(a, {0, 2, 1})); }

Value bmm(Value a, Value b) { return hlo::dot_general(a, b, {{0}, {0}, {2}, {1}}, a.element(), "HIGHEST"); }

// A[b, r[b], c[b]] for per-item indices r, c ([B] i32).
Value entry(Value A, Value r, Value c) {
  Builder& b = A.builder();
  const Dims& d = A.dims();
  Value m = and_(hlo::compare(row_idx(b, d), bvec3(r, d), "EQ"), hlo::compare(col_idx(b, d), bvec3(c, d), "EQ"));
  return hlo::reduce(hlo::select(m, A, hlo::zeros_like(A)), {1, 2}, hlo::ReduceKind::kSum);
}

// Q of the Householder QR of [B, n, n] M (Q^H M = R).
Value householder_q(Value M) {
  Builder& b = M.builder();
  const Dims d = M.dims();
  int64_t B = d[0], n = d[1];
  ElementType e = M.element();
  auto out = hlo::while_loop(
      {ci(b, 0), M, eye(b, e, d)}, [&](const std::vector<Value>& s) { return hlo::compare(s[0], ci(b, n - 1), "LT"); },
      [&](const std::vector<Value>& s) {
        Value j = s[0], R = s[1], Q = s[2];
        Value col = pick(R, hlo::compare(col_idx(b, d), bc(j, d), "EQ"), 2);  // [B, n]
        Value ri = iota_i(b, {B, n}, 1), jn = bc(j, {B, n});
        Value at = hlo::compare(ri, jn, "EQ"), below = hlo::compare(ri, jn, "GT");
        Value x = hlo::select(hlo::compare(ri, jn, "GE"), col, hlo::zeros_like(col));
        Value alpha = pick(col, at, 1);  // [B]
        Value a2 = abs2(x);
        Value tail = hlo::reduce(hlo::select(below, a2, hlo::zeros_like(a2)), {1}, hlo::ReduceKind::kSum);
        Value nrm = hlo::unary("sqrt", hlo::reduce(a2, {1}, hlo::ReduceKind::kSum));
        Value aa = hlo::unary("abs", alpha);
        Value fz = hlo::zeros_like(aa), fone = hlo::full_like(aa, 1);
        Value anz = hlo::compare(aa, fz, "NE");
        // v = x + phase(alpha) |x| e_j (no cancellation); no reflection where
        // x is zero below the diagonal.
        Value phase = hlo::select(anz, hlo::div(alpha, hlo::make_complex(hlo::select(anz, aa, fone), fz)),
                                  hlo::full_like(alpha, 1));
        Value shift = hlo::mul(phase, hlo::make_complex(nrm, fz));
        Value v = hlo::add(x, hlo::select(at, hlo::broadcast_in_dim(shift, {B, n}, {0}), hlo::zeros_like(x)));
        Value vn2 = hlo::reduce(abs2(v), {1}, hlo::ReduceKind::kSum);
        Value act = hlo::compare(tail, fz, "GT");
        Value scale = hlo::select(act, hlo::div(hlo::full_like(vn2, 2), hlo::select(act, vn2, fone)), fz);
        Value sc = hlo::make_complex(scale, fz);  // [B]
        Value vc = hlo::reshape(v, {B, n, 1});
        // R <- R - s v (v^H R);  Q <- Q - s (Q v) v^H.
        Value vhR = bmm(mH(vc), R);  // [B, 1, n]
        Value upd = hlo::mul(bmm(vc, vhR), hlo::broadcast_in_dim(sc, d, {0}));
        R = hlo::sub(R, upd);
        Value Qv = bmm(Q, vc);  // [B, n, 1]
        Q = hlo::sub(Q, hlo::mul(bmm(Qv, mH(vc)), hlo::broadcast_in_dim(sc, d, {0})));
        return std::vector<Value>{hlo::add(j, ci(b, 1)), R, Q};
      });
  return out[2];
}

// Wilkinson shift of the trailing 2x2 [[a, b], [c, d]]: its eigenvalue
// closer to d.
Value wilkinson(Value a, Value b_, Value c, Value d) {
  Value half = hlo::full_like(a, 0.5);
  Value h = hlo::mul(hlo::sub(a, d), half);
  Value disc = hlo::unary("sqrt", hlo::add(hlo::mul(h, h), hlo::mul(b_, c)));
  Value mid = hlo::mul(hlo::add(a, d), half);
  Value m1 = hlo::add(mid, disc), m2 = hlo::sub(mid, disc);
  return hlo::select(hlo::compare(abs2(hlo::sub(m1, d)), abs2(hlo::sub(m2, d)), "LE"), m1, m2);
}

// Schur form of [B, n, n] complex A: (T, Z) with A = Z T Z^H.
std::pair<Value, Value> schur(Value A0) {
  Builder& b = A0.builder();
  const Dims d = A0.dims();
  int64_t B = d[0], n = d[1];
  ElementType e = A0.element();
  ElementType f = hlo::complex_component(e);
  double eps = f == ElementType::kF64 ? 2.220446049250313e-16 : 5.960464477539063e-08;
  Value Z0 = eye(b, e, d);
  if (n < 2) return {A0, Z0};
  Value m0 = hlo::full(b, ElementType::kI32, {B}, static_cast<double>(n));
  Value stall0 = hlo::full(b, ElementType::kI32, {B}, 0);
  int64_t maxit = 30 * n;
  auto out = hlo::while_loop(
      {ci(b, 0), m0, stall0, A0, Z0},
      [&](const std::vector<Value>& s) {
        Value any = hlo::reduce(hlo::compare(s[1], hlo::full(b, ElementType::kI32, {B}, 1), "GT"), {0},
                                hlo::ReduceKind::kOr);
        return and_(any, hlo::compare(s[0], ci(b, maxit), "LT"));
      },
      [&](const std::vector<Value>& s) {
        Value it = s[0], m = s[1], stall = s[2], A = s[3], Z = s[4];
        Value one_i = hlo::full(b, ElementType::kI32, {B}, 1);
        Value live = hlo::compare(m, one_i, "GT");  // [B]
        Value r = hlo::sub(m, one_i), r1 = hlo::sub(r, one_i);
        r1 = hlo::select(live, r1, hlo::zeros_like(r1));
        r = hlo::select(live, r, one_i);
        Value a = entry(A, r1, r1), bb = entry(A, r1, r), c = entry(A, r, r1), dd = entry(A, r, r);
        Value mu = wilkinson(a, bb, c, dd);
        // Exceptional shift after 10 steps without a deflation.
        Value ten = hlo::full(b, ElementType::kI32, {B}, 10);
        Value odd = hlo::compare(hlo::binary("remainder", stall, ten), hlo::full(b, ElementType::kI32, {B}, 9), "EQ");
        Value ca = hlo::unary("sqrt", abs2(c));
        Value kick = hlo::make_complex(hlo::mul(ca, hlo::full_like(ca, 0.75)), hlo::mul(ca, hlo::full_like(ca, -0.4375)));
        mu = hlo::select(odd, hlo::add(dd, kick), mu);
        // Active block of A - mu I, identity outside it (and for finished items).
        Value R = row_idx(b, d), C = col_idx(b, d);
        Value mb = bvec3(m, d);
        Value inside = and_(and_(hlo::compare(R, mb, "LT"), hlo::compare(C, mb, "LT")), bvec3(live, d));
        Value diag = hlo::compare(R, C, "EQ");
        Value shifted = hlo::sub(A, hlo::select(diag, hlo::broadcast_in_dim(mu, d, {0}), hlo::zeros_like(A)));
        Value M = hlo::select(inside, shifted, hlo::select(diag, hlo::full_like(A, 1), hlo::zeros_like(A)));
        Value Q = householder_q(M);
        A = bmm(mH(Q), bmm(A, Q));
        Z = bmm(Z, Q);
        // Deflate where the active block's last row is negligible.
        Value rowm = and_(hlo::compare(R, bvec3(r, d), "EQ"), hlo::compare(C, bvec3(r, d), "LT"));
        Value a2 = abs2(A);
        Value off = hlo::reduce(hlo::select(rowm, a2, hlo::zeros_like(a2)), {1, 2}, hlo::ReduceKind::kSum);
        Value scale = hlo::add(abs2(entry(A, r, r)), abs2(entry(A, r1, r1)));
        Value tiny = hlo::full_like(off, f == ElementType::kF64 ? 1e-300 : 1e-36);
        Value done = and_(live, or_(hlo::compare(off, hlo::mul(scale, hlo::full_like(scale, eps * eps)), "LE"),
                                    hlo::compare(off, tiny, "LE")));
        A = hlo::select(and_(rowm, bvec3(done, d)), hlo::zeros_like(A), A);
        m = hlo::select(done, r, m);
        stall = hlo::select(done, hlo::zeros_like(stall), hlo::add(stall, one_i));
        return std::vector<Value>{hlo::add(it, ci(b, 1)), m, stall, A, Z};
      });
  return {out[3], out[4]};
}

// Eigenvectors of upper-triangular T [B, n, n] (columns; unnormalised).
Value triangular_eigenvectors(Value T) {
  Builder& b = T.builder();
  const Dims d = T.dims();
  int64_t B = d[0], n = d[1];
  ElementType e = T.element();
  ElementType f = hlo::complex_component(e);
  double eps = f == ElementType::kF64 ? 2.220446049250313e-16 : 5.960464477539063e-08;
  Value w = diagonal(T);  // [B, n]
  Value tnorm = hlo::reduce(hlo::unary("abs", T), {1, 2}, hlo::ReduceKind::kMax);
  Value smin = hlo::mul(tnorm, hlo::full_like(tnorm, eps));
  smin = hlo::select(hlo::compare(smin, hlo::zeros_like(smin), "GT"), smin, hlo::full_like(smin, 1e-30));
  auto out = hlo::while_loop(
      {ci(b, n - 1), hlo::zeros_like(T), T, w, smin},
      [&](const std::vector<Value>& s) { return hlo::compare(s[0], ci(b, 0), "GE"); },
      [&](const std::vector<Value>& s) {
        Value i = s[0], Y = s[1], Tt = s[2], ww = s[3], sm = s[4];
        Value Ri = hlo::compare(row_idx(b, d), bc(i, d), "EQ");
        Value trow = hlo::reshape(pick(Tt, Ri, 1), {B, 1, n});  // T[i, :]
        Value srow = hlo::reshape(bmm(trow, Y), {B, n});       // sum_l T[i, l] Y[l, k]
        Value ki = iota_i(b, {B, n}, 1), in_ = bc(i, {B, n});
        Value wi = pick(ww, hlo::compare(ki, in_, "EQ"), 1);    // [B]
        Value den = hlo::sub(hlo::broadcast_in_dim(wi, {B, n}, {0}), ww);
        Value smb = hlo::broadcast_in_dim(sm, {B, n}, {0});
        Value small = hlo::compare(hlo::unary("abs", den), smb, "LT");
        den = hlo::select(small, hlo::make_complex(smb, hlo::zeros_like(smb)), den);
        Value yi = hlo::neg(hlo::div(srow, den));
        yi = hlo::select(hlo::compare(ki, in_, "GT"), yi,
                         hlo::select(hlo::compare(ki, in_, "EQ"), hlo::full_like(yi, 1), hlo::zeros_like(yi)));
        Y = hlo::select(Ri, hlo::broadcast_in_dim(yi, d, {0, 2}), Y);
        return std::vector<Value>{hlo::sub(i, ci(b, 1)), Y, Tt, ww, sm};
      });
  return out[1];
}

// Columns scaled to unit norm with their largest component real and positive.
Value normalise_columns(Value V) {
  Builder& b = V.builder();
  const Dims d = V.dims();
  int64_t n = d[1];
  Value a2 = abs2(V);
  Value nrm = hlo::unary("sqrt", hlo::reduce(a2, {1}, hlo::ReduceKind::kSum));  // [B, n]
  Value mx = hlo::reduce(a2, {1}, hlo::ReduceKind::kMax);
  Value R = row_idx(b, d);
  Value cand = hlo::compare(a2, hlo::broadcast_in_dim(mx, d, {0, 2}), "EQ");
  Value first = hlo::reduce(hlo::select(cand, R, hlo::full_like(R, static_cast<double>(n))), {1}, hlo::ReduceKind::kMin);
  Value big = pick(V, hlo::compare(R, hlo::broadcast_in_dim(first, d, {0, 2}), "EQ"), 1);  // [B, n]
  Value bigabs = hlo::unary("abs", big);
  Value nz = hlo::compare(bigabs, hlo::zeros_like(bigabs), "GT");
  Value fone = hlo::full_like(bigabs, 1);
  // conj(phase) / norm
  Value denom = hlo::mul(hlo::select(nz, bigabs, fone), hlo::select(nz, nrm, fone));
  Value factor = hlo::select(nz, hlo::div(hlo::conj(big), hlo::make_complex(denom, hlo::zeros_like(denom))),
                             hlo::full_like(big, 1));
  return hlo::mul(V, hlo::broadcast_in_dim(factor, d, {0, 2}));
}

struct Eig {
  Value w, V;  // [batch..., n], [batch..., n, n]
};

Eig eig(LowerCtx& ctx, bool vectors) {
  at::ScalarType t = ctx.dtype_of("self");
  TORCH_CHECK(t == at::kFloat || t == at::kDouble || t == at::kComplexFloat || t == at::kComplexDouble,
              ctx.op_name(), ": expected a float or complex tensor, got ", t);
  Value A = ctx.tensor("self");
  TORCH_CHECK(A.rank() >= 2 && A.dim(A.rank() - 1) == A.dim(A.rank() - 2), ctx.op_name(),
              ": A must be batches of square matrices, but they are ", A.dim(A.rank() - 2), " by ",
              A.dim(A.rank() - 1), " matrices");
  ElementType ce = (t == at::kDouble || t == at::kComplexDouble) ? ElementType::kC128 : ElementType::kC64;
  Dims batch = batch_of(A.dims());
  int64_t n = A.dim(A.rank() - 1), B = numel(batch);
  Value a = hlo::reshape(hlo::convert(A, ce), {B, n, n});
  auto [T, Z] = schur(a);
  Value w = hlo::reshape(diagonal(T), cat(batch, {n}));
  if (!vectors) return {w, Value()};
  Value V = normalise_columns(bmm(Z, triangular_eigenvectors(T)));
  return {w, hlo::reshape(V, cat(batch, {n, n}))};
}

}  // namespace

TPU_LOWERING(linalg_eig) {
  Eig r = eig(ctx, true);
  return {r.w, r.V};
}

TPU_LOWERING(_linalg_eigvals) { return {eig(ctx, false).w}; }
// linalg_eigvals.out has CPU/CUDA kernels of its own, not a composite over
// _linalg_eigvals: the same rule serves it.
TPU_LOWERING_ALIAS(linalg_eigvals, _linalg_eigvals);

}  // namespace torch_tpu::lowering
