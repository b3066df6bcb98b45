// Decompositions: geqrf, linalg_householder_product, ormqr, linalg_qr,
// _linalg_eigh, _linalg_svd, linalg_lstsq, linalg_matrix_exp; real and
// complex (the complex forms of the same algorithms, linalg_cplx.h).
//
// None of QR / eigh / SVD is a StableHLO op; each is one or two
// stablehlo.while loops, so program size does not depend on n:
//  - QR: Householder reflections column by column with LAPACK's dlarfg sign
//    convention (so R and tau match CPU), reflectors stored below the
//    diagonal like geqrf; Q is built by applying them to the identity.
//  - eigh: cyclic Jacobi, one rotation per loop step over all (p, q) pairs,
//    until the off-diagonal mass is below eps^2 of the total or a sweep cap;
//    eigenvalues sorted ascending with their vectors.
//  - SVD: eigh of A^H A gives V; B = A V has orthogonal columns, and the
//    Householder QR of B gives U (complete, so rank-deficient inputs and
//    full_matrices work) with |R_jj| the singular values.
#include <ATen/ExpandUtils.h>

#include "lowering/linalg_cplx.h"

namespace torch_tpu::lowering {
namespace {
using namespace la;

Value and_(Value a, Value b) { return hlo::binary("and", a, b); }

Value flat3(Value a) {
  int64_t r = a.dim(a.rank() - 2), c = a.dim(a.rank() - 1);
  return hlo::reshape(a, {numel(batch_of(a.dims())), r, c});
}
Value unflat(Value a, const Dims& batch) {
  Dims tail(a.dims().begin() + 1, a.dims().end());
  return hlo::reshape(a, cat(batch, tail));
}
Value bvec(Value v, const Dims& d, Dims keep) { return hlo::broadcast_in_dim(v, d, keep); }

// Householder QR of [B, m, n] in LAPACK's packed form: (A with R on and
// above the diagonal and the reflectors below, tau [B, k]). The reflector
// follows ?larfg (complex: zlarfg): beta = -sign(re alpha) * ||(alpha, x)||
// real, tau = (beta - alpha) / beta, v = x / (alpha - beta); H = I - tau v v^H
// and H^H is applied to the trailing columns, as ?geqr2 does.
std::pair<Value, Value> geqrf(Value a) {
  Builder& b = a.builder();
  const Dims d = a.dims();
  int64_t B = d[0], m = d[1], n = d[2], k = std::min(m, n);
  ElementType e = a.element(), er = real_of(e);
  Value tau0 = hlo::full(b, e, {B, k}, 0);
  auto out = hlo::while_loop(
      {ci(b, 0), a, tau0}, [&](const std::vector<Value>& s) { return hlo::compare(s[0], ci(b, k), "LT"); },
      [&](const std::vector<Value>& s) {
        Value j = s[0], A = s[1], tau = s[2];
        Value R = row_idx(b, d), C = col_idx(b, d), jd = bc(j, d);
        Value colmask = hlo::compare(C, jd, "EQ");
        Value col = pick(A, colmask, 2);  // [B, m]
        Value ri = iota_i(b, {B, m}, 1), jm = bc(j, {B, m});
        Value below = hlo::compare(ri, jm, "GT"), at = hlo::compare(ri, jm, "EQ");
        Value alpha = pick(col, at, 1);  // [B]
        Value ar = hlo::real(alpha), ai = hlo::imag(alpha);
        Value sq = abs2(col);
        Value x2 = hlo::reduce(hlo::select(below, sq, hlo::zeros_like(sq)), {1}, hlo::ReduceKind::kSum);
        Value zero = hlo::full(b, er, {B}, 0), one = hlo::full(b, er, {B}, 1);
        Value nz = hlo::binary("or", hlo::compare(x2, zero, "NE"), hlo::compare(ai, zero, "NE"));
        Value nrm = hlo::unary("sqrt", hlo::add(hlo::add(hlo::mul(ar, ar), hlo::mul(ai, ai)), x2));
        Value beta = hlo::select(hlo::compare(ar, zero, "GE"), hlo::neg(nrm), nrm);
        beta = hlo::select(nz, beta, ar);  // real
        Value safe_beta = hlo::select(nz, beta, one);
        Value t = mk(hlo::select(nz, hlo::div(hlo::sub(beta, ar), safe_beta), zero),
                     hlo::select(nz, hlo::div(hlo::neg(ai), safe_beta), zero), e);
        Value be = as_elem(beta, e);
        Value denom = hlo::select(nz, hlo::sub(alpha, be), hlo::full(b, e, {B}, 1));
        Value scale = hlo::div(hlo::full(b, e, {B}, 1), denom);
        Value v = hlo::select(below, hlo::mul(col, bvec(scale, {B, m}, {0})),
                              hlo::select(at, hlo::full(b, e, {B, m}, 1), hlo::full(b, e, {B, m}, 0)));
        Value vd = bvec(v, d, {0, 1});
        Value vA = hlo::select(hlo::compare(R, jd, "GE"), hlo::mul(cj(vd), A), hlo::zeros_like(A));
        Value w = hlo::reduce(vA, {1}, hlo::ReduceKind::kSum);  // [B, n]: v^H A
        Value upd = hlo::sub(A, hlo::mul(bvec(cj(t), d, {0}), hlo::mul(vd, bvec(w, d, {0, 2}))));
        A = hlo::select(and_(hlo::compare(C, jd, "GT"), hlo::compare(R, jd, "GE")), upd, A);
        A = hlo::select(and_(colmask, hlo::compare(R, jd, "EQ")), bvec(be, d, {0}),
                        hlo::select(and_(colmask, hlo::compare(R, jd, "GT")), vd, A));
        Value ki = iota_i(b, {B, k}, 1);
        tau = hlo::select(hlo::compare(ki, bc(j, {B, k}), "EQ"), bvec(t, {B, k}, {0}), tau);
        return std::vector<Value>{hlo::add(j, ci(b, 1)), A, tau};
      });
  return {out[1], out[2]};
}

// Applies the reflectors H_j = I - tau_j v_j v_j^H stored in V [B, m, kv]
// (unit diagonal implied, above ignored) for j < tau's k, to C: from the left
// (C [B, m, p]) or the right (C [B, p, m]), in ascending or descending j;
// `adjoint` applies H_j^H (conj(tau_j)) instead.
Value apply_reflectors(Value V, Value tau, Value Cm, bool left, bool ascending, bool adjoint = false) {
  Builder& b = V.builder();
  int64_t B = V.dim(0), m = V.dim(1), kv = V.dim(2), k = tau.dim(1);
  k = std::min(k, kv);
  if (k == 0) return Cm;
  ElementType e = V.element();
  const Dims vd = V.dims(), cd = Cm.dims();
  auto out = hlo::while_loop(
      {ci(b, 0), Cm, V, tau}, [&](const std::vector<Value>& s) { return hlo::compare(s[0], ci(b, k), "LT"); },
      [&](const std::vector<Value>& s) {
        Value i = s[0], C = s[1], Vs = s[2], T = s[3];
        Value j = ascending ? i : hlo::sub(ci(b, k - 1), i);
        Value col = pick(Vs, hlo::compare(col_idx(b, vd), bc(j, vd), "EQ"), 2);  // [B, m]
        Value ri = iota_i(b, {B, m}, 1), jm = bc(j, {B, m});
        Value v = hlo::select(hlo::compare(ri, jm, "GT"), col,
                              hlo::select(hlo::compare(ri, jm, "EQ"), hlo::full(b, e, {B, m}, 1),
                                          hlo::full(b, e, {B, m}, 0)));
        Value t = pick(T, hlo::compare(iota_i(b, T.dims(), 1), bc(j, T.dims()), "EQ"), 1);  // [B]
        if (adjoint) t = cj(t);
        if (left) {  // C - t v (v^H C)
          Value vdm = bvec(v, cd, {0, 1});
          Value w = hlo::reduce(hlo::mul(cj(vdm), C), {1}, hlo::ReduceKind::kSum);  // [B, p]
          C = hlo::sub(C, hlo::mul(bvec(t, cd, {0}), hlo::mul(vdm, bvec(w, cd, {0, 2}))));
        } else {  // C - t (C v) v^H
          Value vdm = bvec(v, cd, {0, 2});
          Value w = hlo::reduce(hlo::mul(vdm, C), {2}, hlo::ReduceKind::kSum);  // [B, p]
          C = hlo::sub(C, hlo::mul(bvec(t, cd, {0}), hlo::mul(cj(vdm), bvec(w, cd, {0, 1}))));
        }
        return std::vector<Value>{hlo::add(i, ci(b, 1)), C, Vs, T};
      });
  return out[1];
}

// Q's first q columns ([B, m, q]) from packed reflectors.
Value form_q(Value V, Value tau, int64_t q) {
  int64_t B = V.dim(0), m = V.dim(1);
  Value I = eye(V.builder(), V.element(), {B, m, q});
  return apply_reflectors(V, tau, I, true, false);
}

std::vector<int64_t> out_dims(LowerCtx& ctx, int i) {
  auto s = ctx.out_sizes(i);
  TORCH_CHECK(s.has_value(), ctx.op_name(), ": output shape unknown");
  return *s;
}

}  // namespace

TPU_LOWERING(geqrf) {
  check_float_or_complex(ctx, "self");
  Value A = ctx.tensor("self");
  Dims batch = batch_of(A.dims());
  auto [a, tau] = geqrf(flat3(A));
  return {unflat(a, batch), hlo::reshape(tau, cat(batch, {tau.dim(1)}))};
}

TPU_LOWERING(linalg_householder_product) {
  check_float_or_complex(ctx, "input");
  Value V = ctx.tensor("input");
  Dims batch = batch_of(V.dims());
  Value tau = hlo::reshape(ctx.tensor("tau"), {numel(batch), ctx.tensor("tau").dim(ctx.tensor("tau").rank() - 1)});
  Value Vf = flat3(V);
  return {unflat(form_q(Vf, tau, Vf.dim(2)), batch)};
}

TPU_LOWERING(ormqr) {
  check_float_or_complex(ctx, "self");
  Value V = ctx.tensor("self"), C = ctx.tensor("input3");
  Dims batch = batch_of(C.dims());
  Value T = ctx.tensor("input2");
  bool left = ctx.bool_arg("left"), trans = ctx.bool_arg("transpose");
  Value Vf = flat3(bcast_batch(V, batch));
  Dims tb = cat(batch, {T.dim(T.rank() - 1)});
  Value Tf = hlo::reshape(T.dims() == tb ? T : hlo::broadcast_to(T, tb), {numel(batch), T.dim(T.rank() - 1)});
  // transpose means Q^H (conjugate transpose for complex, as on CPU).
  return {unflat(apply_reflectors(Vf, Tf, flat3(C), left, left == trans, trans), batch)};
}

TPU_LOWERING(linalg_qr) {
  check_float_or_complex(ctx, "A");
  Value A = ctx.tensor("A");
  std::string mode = ctx.str_arg("mode");
  Dims batch = batch_of(A.dims());
  int64_t m = A.dim(A.rank() - 2), n = A.dim(A.rank() - 1), k = std::min(m, n);
  auto [a, tau] = geqrf(flat3(A));
  int64_t B = a.dim(0);
  bool complete = mode == "complete";
  Value R = triu(complete ? a : hlo::slice(a, {0, 0, 0}, {B, k, n}));
  Value Q;
  if (mode == "r") {
    Q = hlo::full(ctx.b(), A.element(), out_dims(ctx, 0), 0);
  } else {
    Q = unflat(form_q(hlo::slice(a, {0, 0, 0}, {B, m, k}), tau, complete ? m : k), batch);
  }
  return {Q, unflat(R, batch)};
}

namespace {

// Cyclic Jacobi on symmetric / Hermitian [B, n, n]: (eigenvalues [B, n]
// real, ascending, eigenvectors [B, n, n] as columns). A complex pair is
// first made real by a phase: column q times conj(u), row q times u, with
// u = a_pq / |a_pq|; the real rotation of the pair follows.
std::pair<Value, Value> jacobi_eigh(Value a) {
  Builder& b = a.builder();
  const Dims d = a.dims();
  int64_t B = d[0], n = d[1];
  ElementType e = a.element(), er = real_of(e);
  bool cx = cplx(a);
  Value V0 = eye(b, e, d);
  if (n >= 2) {
    double eps = er == ElementType::kF64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
    auto out = hlo::while_loop(
        {ci(b, 0), ci(b, 1), ci(b, 0), a, V0},
        [&](const std::vector<Value>& s) {
          Value A = s[3];
          Value offm = hlo::compare(row_idx(b, d), col_idx(b, d), "NE");
          Value sq = abs2(A);
          Value off = hlo::reduce(hlo::select(offm, sq, hlo::zeros_like(sq)), {0, 1, 2}, hlo::ReduceKind::kSum);
          Value tot = hlo::reduce(sq, {0, 1, 2}, hlo::ReduceKind::kSum);
          Value go = hlo::compare(off, hlo::mul(tot, hlo::constant(b, er, eps * eps)), "GT");
          return and_(go, hlo::compare(s[2], ci(b, 30), "LT"));
        },
        [&](const std::vector<Value>& s) {
          Value p = s[0], q = s[1], sweep = s[2], A = s[3], V = s[4];
          Value R = row_idx(b, d), C = col_idx(b, d);
          Value Rp = hlo::compare(R, bc(p, d), "EQ"), Rq = hlo::compare(R, bc(q, d), "EQ");
          Value Cp = hlo::compare(C, bc(p, d), "EQ"), Cq = hlo::compare(C, bc(q, d), "EQ");
          auto entry = [&](Value r, Value c) {
            return hlo::reduce(hlo::select(and_(r, c), A, hlo::zeros_like(A)), {1, 2}, hlo::ReduceKind::kSum);
          };
          Value app = entry(Rp, Cp), aqq = entry(Rq, Cq), apq = entry(Rp, Cq);
          if (cx) {
            Value u = phase(apq);  // [B]
            Value ud = bvec(u, d, {0}), uc = bvec(cj(u), d, {0});
            A = hlo::select(Cq, hlo::mul(A, uc), A);
            A = hlo::select(Rq, hlo::mul(A, ud), A);
            V = hlo::select(Cq, hlo::mul(V, uc), V);
            app = hlo::real(app);
            aqq = hlo::real(aqq);
            apq = hlo::unary("abs", apq);
          }
          Value zero = hlo::full(b, er, {B}, 0), one = hlo::full(b, er, {B}, 1);
          Value nz = hlo::compare(apq, zero, "NE");
          Value safe = hlo::select(nz, apq, one);
          Value th = hlo::div(hlo::sub(aqq, app), hlo::mul(hlo::full(b, er, {B}, 2), safe));
          Value sgn = hlo::select(hlo::compare(th, zero, "GE"), one, hlo::neg(one));
          Value t = hlo::div(sgn, hlo::add(hlo::unary("abs", th), hlo::unary("sqrt", hlo::add(one, hlo::mul(th, th)))));
          t = hlo::select(nz, t, zero);
          Value c = hlo::unary("rsqrt", hlo::add(one, hlo::mul(t, t)));
          Value sn = hlo::mul(t, c);
          Value cd = as_elem(bvec(c, d, {0}), e), sd = as_elem(bvec(sn, d, {0}), e);
          // Columns: col_p' = c col_p - s col_q, col_q' = s col_p + c col_q.
          auto cols = [&](Value X) {
            Value xp = pick(X, Cp, 2), xq = pick(X, Cq, 2);  // [B, n] (rows)
            Value xpd = bvec(xp, d, {0, 1}), xqd = bvec(xq, d, {0, 1});
            Value np = hlo::sub(hlo::mul(cd, xpd), hlo::mul(sd, xqd));
            Value nq = hlo::add(hlo::mul(sd, xpd), hlo::mul(cd, xqd));
            return hlo::select(Cp, np, hlo::select(Cq, nq, X));
          };
          auto rows = [&](Value X) {
            Value xp = pick(X, Rp, 1), xq = pick(X, Rq, 1);  // [B, n] (cols)
            Value xpd = bvec(xp, d, {0, 2}), xqd = bvec(xq, d, {0, 2});
            Value np = hlo::sub(hlo::mul(cd, xpd), hlo::mul(sd, xqd));
            Value nq = hlo::add(hlo::mul(sd, xpd), hlo::mul(cd, xqd));
            return hlo::select(Rp, np, hlo::select(Rq, nq, X));
          };
          A = rows(cols(A));
          // The rotated pair is exactly diagonal now.
          A = hlo::select(and_(Rp, Cq), hlo::zeros_like(A), hlo::select(and_(Rq, Cp), hlo::zeros_like(A), A));
          V = cols(V);
          // Next pair.
          Value q1 = hlo::add(q, ci(b, 1));
          Value wrap = hlo::compare(q1, ci(b, n), "EQ");
          Value p1 = hlo::select(wrap, hlo::add(p, ci(b, 1)), p);
          q1 = hlo::select(wrap, hlo::add(p1, ci(b, 1)), q1);
          Value done = hlo::compare(p1, ci(b, n - 1), "EQ");
          p1 = hlo::select(done, ci(b, 0), p1);
          q1 = hlo::select(done, ci(b, 1), q1);
          sweep = hlo::select(done, hlo::add(sweep, ci(b, 1)), sweep);
          return std::vector<Value>{p1, q1, sweep, A, V};
        });
    a = out[3];
    V0 = out[4];
  }
  Value w = hlo::real(diagonal(a));
  auto sorted = hlo::sort({w, iota_i(b, {B, n}, 1)}, 1, false, true);
  Value V = mm(V0, mT(perm_matrix(sorted[1], e)));
  return {sorted[0], V};
}

// SVD of [B, m, n] with m >= n: (U [B, m, m or n], S [B, n] real, V [B, n, n]).
// U's first n columns carry the phase of R's diagonal, so A = U S V^H.
std::tuple<Value, Value, Value> svd_tall(Value a, bool full) {
  Builder& b = a.builder();
  int64_t B = a.dim(0), m = a.dim(1), n = a.dim(2);
  ElementType e = a.element();
  auto [w, V] = jacobi_eigh(mm(mH(a), a));
  V = hlo::reverse(V, {2});  // descending singular values
  Value Bm = mm(a, V);       // [B, m, n], orthogonal columns
  auto [qa, tau] = geqrf(Bm);
  Value r = diagonal(qa);  // [B, n]
  Value S = hlo::unary("abs", r);
  Value sg = phase(r);
  int64_t q = full ? m : n;
  Value U = form_q(qa, tau, q);
  // Flip the first n columns of U by the sign of R's diagonal.
  Value sgq = q == n ? sg : hlo::concatenate({sg, hlo::full(b, e, {B, q - n}, 1)}, 1);
  U = hlo::mul(U, bvec(sgq, U.dims(), {0, 2}));
  // R is diagonal only up to rounding: sort by |R_jj| (descending) to be safe.
  Value negS = hlo::neg(S);
  auto srt = hlo::sort({negS, iota_i(b, {B, n}, 1)}, 1, false, true);
  Value P = mT(perm_matrix(srt[1], e));  // X @ P permutes columns (real entries)
  S = hlo::neg(srt[0]);
  V = mm(V, P);
  Value Un = hlo::slice(U, {0, 0, 0}, {B, m, n});
  Un = mm(Un, P);
  U = q == n ? Un : hlo::concatenate({Un, hlo::slice(U, {0, 0, n}, {B, m, q})}, 2);
  return {U, S, V};
}

}  // namespace

TPU_LOWERING(_linalg_eigh) {
  check_float_or_complex(ctx, "A");
  Value A = ctx.tensor("A");
  Dims batch = batch_of(A.dims());
  std::string uplo = ctx.str_arg("UPLO");
  bool lower = uplo == "L" || uplo == "l";
  auto [w, V] = jacobi_eigh(flat3(hermitize(A, lower)));
  Value vecs = ctx.bool_arg("compute_v") ? unflat(V, batch) : hlo::full(ctx.b(), A.element(), out_dims(ctx, 1), 0);
  return {hlo::reshape(w, cat(batch, {w.dim(1)})), vecs};
}

TPU_LOWERING(_linalg_svd) {
  check_float_or_complex(ctx, "A");
  Value A = ctx.tensor("A");
  Dims batch = batch_of(A.dims());
  int64_t m = A.dim(A.rank() - 2), n = A.dim(A.rank() - 1), k = std::min(m, n);
  bool full = ctx.bool_arg("full_matrices"), uv = ctx.bool_arg("compute_uv");
  Value F = flat3(A);
  bool wide = m < n;
  auto [U, S, V] = svd_tall(wide ? mH(F) : F, full);
  // wide: A^H = U S V^H  =>  A = V S U^H.
  Value Uo = wide ? V : U, Vh = wide ? mH(U) : mH(V);
  Value s = hlo::reshape(S, cat(batch, {k}));
  if (!uv) {
    return {hlo::full(ctx.b(), A.element(), out_dims(ctx, 0), 0), s,
            hlo::full(ctx.b(), A.element(), out_dims(ctx, 2), 0)};
  }
  return {unflat(Uo, batch), s, unflat(Vh, batch)};
}

TPU_LOWERING(linalg_matrix_exp) {
  // bf16 / f16 (which CPU accepts) are computed in f32 and rounded once.
  at::ScalarType st = ctx.dtype_of("self");
  TORCH_CHECK(at::isFloatingType(st) || at::isComplexType(st), ctx.op_name(),
              ": expected a floating point or complex input, got ", st);
  Value A = ctx.tensor("self");
  if (!cplx(A) && A.element() != ElementType::kF64) A = hlo::convert(A, ElementType::kF32);
  Builder& b = ctx.b();
  Dims batch = batch_of(A.dims());
  Value X = flat3(A);
  const Dims d = X.dims();
  int64_t B = d[0];
  ElementType e = X.element(), er = real_of(e);
  // Scale so that ||X||_1 <= 1/2, Taylor to degree 18, square back.
  Value norm1 = hlo::reduce(hlo::reduce(hlo::unary("abs", X), {1}, hlo::ReduceKind::kSum), {1}, hlo::ReduceKind::kMax);
  Value l2 = hlo::unary("ceil", hlo::div(hlo::unary("log", hlo::mul(norm1, hlo::full(b, er, {B}, 2))),
                                         hlo::full(b, er, {B}, std::log(2.0))));
  l2 = hlo::clamp(hlo::constant(b, er, 0), l2, hlo::constant(b, er, 1000));
  l2 = hlo::select(hlo::compare(l2, l2, "EQ"), l2, hlo::full(b, er, {B}, 0));
  Value s = hlo::convert(l2, ElementType::kI32);  // [B]
  Value scale = hlo::unary("exponential", hlo::mul(hlo::neg(l2), hlo::full(b, er, {B}, std::log(2.0))));
  X = hlo::mul(X, as_elem(bvec(scale, d, {0}), e));
  Value I = eye(b, e, d);
  Value E = I;
  for (int k = 18; k >= 1; --k) E = hlo::add(I, hlo::mul(mm(X, E), hlo::full(b, e, d, 1.0 / k)));
  Value smax = hlo::reduce(s, {0}, hlo::ReduceKind::kMax);
  if (B == 0) return {unflat(E, batch)};
  auto out = hlo::while_loop(
      {ci(b, 0), E, s, smax}, [&](const std::vector<Value>& st) { return hlo::compare(st[0], st[3], "LT"); },
      [&](const std::vector<Value>& st) {
        Value i = st[0], M = st[1];
        Value sq = mm(M, M);
        Value act = hlo::compare(bvec(st[2], d, {0}), bc(i, d), "GT");
        return std::vector<Value>{hlo::add(i, ci(b, 1)), hlo::select(act, sq, M), st[2], st[3]};
      });
  return {unflat(out[1], batch)};
}

TPU_LOWERING(linalg_lstsq) {
  check_float_or_complex(ctx, "self");
  Value A = ctx.tensor("self"), Bv = ctx.tensor("b");
  Builder& b = ctx.b();
  TORCH_CHECK(A.rank() >= 2, "torch.linalg.lstsq: input must have at least 2 dimensions.");
  TORCH_CHECK(Bv.rank() >= 1, "torch.linalg.lstsq: other must have at least 1 dimension.");
  int64_t m = A.dim(A.rank() - 2), n = A.dim(A.rank() - 1), k = std::min(m, n);
  // CPU's vector case: b is [m], or A's shape without its last dimension.
  bool vec = Bv.rank() == 1 ||
             (Bv.rank() == A.rank() - 1 && Bv.dims() == Dims(A.dims().begin(), A.dims().end() - 1));
  TORCH_CHECK(Bv.dim(Bv.rank() - (vec ? 1 : 2)) == m, "torch.linalg.lstsq: input.size(-2) should match other.size(",
              vec ? "-1" : "-2", ")");
  std::string driver = ctx.is_none("driver") ? "gelsy" : ctx.str_arg("driver");
  Dims ab = batch_of(A.dims()), bb = vec ? Dims(Bv.dims().begin(), Bv.dims().end() - 1) : batch_of(Bv.dims());
  Dims batch = at::infer_size(ab, bb);
  if (vec) {
    Dims bd = Bv.dims();
    bd.push_back(1);
    Bv = hlo::reshape(Bv, bd);
  }
  Value Af = flat3(bcast_batch(A, batch)), Bf = flat3(bcast_batch(Bv, batch));
  int64_t BB = Af.dim(0), nr = Bf.dim(2);
  Value X, residuals;
  if (m >= n) {
    // A = Q R: x = R^-1 (Q^H b)[:n].
    auto [qa, tau] = geqrf(Af);
    Value qtb = apply_reflectors(qa, tau, Bf, true, true, true);
    if (m > n && driver != "gelsy") {
      // CPU's residuals: squared norm of the rows of Q^H b past n.
      Value tail = hlo::slice(qtb, {0, n, 0}, {BB, m, nr});
      residuals = hlo::reduce(abs2(tail), {1}, hlo::ReduceKind::kSum);  // [BB, nr]
    }
    Value R = triu(hlo::slice(qa, {0, 0, 0}, {BB, n, n}));
    X = tsolve(R, hlo::slice(qtb, {0, 0, 0}, {BB, n, nr}), true, false, false, false);
  } else {
    // Minimum norm: A^H = Q R, x = Q [R^-H b; 0].
    auto [qa, tau] = geqrf(mH(Af));
    Value R = triu(hlo::slice(qa, {0, 0, 0}, {BB, m, m}));
    Value y = tsolve(R, Bf, true, false, false, true);
    y = hlo::concatenate({y, hlo::full(b, y.element(), {BB, n - m, nr}, 0)}, 1);
    X = apply_reflectors(qa, tau, y, true, false);
  }
  // Shapes by hand: linalg_lstsq has no meta kernel (the engine resizes the
  // out= tensors to these). As on CPU: residuals for a tall A except with
  // gelsy, the rank except with gels (A is taken to have full rank),
  // singular values with gelsd / gelss.
  Dims xs = cat(batch, vec ? Dims{n} : Dims{n, nr});
  Value sol = hlo::reshape(X, xs);
  std::vector<Value> res{sol};
  ElementType er = real_of(A.element());  // residuals and singular values are real
  res.push_back(residuals.valid() ? hlo::reshape(residuals, cat(batch, {nr})) : hlo::full(b, er, {0}, 0));
  res.push_back(driver == "gels" ? hlo::full(b, ElementType::kI64, {0}, 0)
                                 : hlo::full(b, ElementType::kI64, batch, static_cast<double>(k)));
  if (driver == "gelsd" || driver == "gelss") {
    auto [U, S, V] = svd_tall(m >= n ? Af : mH(Af), false);
    res.push_back(hlo::reshape(S, cat(batch, {k})));
  } else {
    res.push_back(hlo::full(b, er, {0}, 0));
  }
  return res;
}

}  // namespace torch_tpu::lowering
