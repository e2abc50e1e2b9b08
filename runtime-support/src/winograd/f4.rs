//! Winograd F(4×4, 3×3): each 4×4 output tile comes from a 6×6 input tile through 36
//! elementwise products (interpolation points 0, ±1, ±2, ∞) — 4× fewer multiplies than direct
//! convolution, against 2.25× for F(2×2, 3×3), at the price of 36/16 more transformed weights
//! and costlier transforms. Used for maps of 20×20 and more (`Variant::F4`).
//!
//! Matrices (checked against direct correlation in the tests):
//! Bᵀ = [[4,0,-5,0,1,0],[0,-4,-4,1,1,0],[0,4,-4,-1,1,0],[0,-2,-1,2,1,0],[0,2,-1,-2,1,0],
//! [0,4,0,-5,0,1]], G = [[¼,0,0],[-⅙,-⅙,-⅙],[-⅙,⅙,-⅙],[1/24,1/12,⅙],[1/24,-1/12,⅙],[0,0,1]],
//! Aᵀ = [[1,1,1,1,1,0],[0,1,-1,2,-2,0],[0,1,1,4,4,0],[0,1,-1,8,-8,1]].

use crate::simd::Simd;

/// `U = G g Gᵀ` (6×6) of one 3×3 kernel, computed in f64.
pub(super) fn transform_kernel(g: &[f32; 9]) -> [f32; 36] {
    const G: [[f64; 3]; 6] = [
        [0.25, 0.0, 0.0],
        [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
        [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
        [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
        [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
        [0.0, 0.0, 1.0],
    ];
    let mut t = [[0f64; 3]; 6]; // G g
    for (r, tr) in t.iter_mut().enumerate() {
        for (c, v) in tr.iter_mut().enumerate() {
            *v = (0..3).map(|k| G[r][k] * g[k * 3 + c] as f64).sum();
        }
    }
    let mut u = [0f32; 36]; // (G g) Gᵀ
    for r in 0..6 {
        for c in 0..6 {
            u[r * 6 + c] = (0..3).map(|k| t[r][k] * G[c][k]).sum::<f64>() as f32;
        }
    }
    u
}

/// `k·a + b` (fused where the instruction set has FMA).
#[inline(always)]
fn fma<S: Simd>(s: S, k: f32, a: S::F, b: S::F) -> S::F {
    s.mul_add(s.splat(k), a, b)
}

/// Bᵀ applied to one column of six values.
#[inline(always)]
pub(super) fn bt<S: Simd>(s: S, d: [S::F; 6]) -> [S::F; 6] {
    let a = fma(s, -4.0, d[2], d[4]);
    let b = fma(s, -4.0, d[1], d[3]);
    let c = s.sub(d[4], d[2]);
    let e = s.sub(d[3], d[1]);
    [
        fma(s, 4.0, d[0], fma(s, -5.0, d[2], d[4])),
        s.add(a, b),
        s.sub(a, b),
        fma(s, 2.0, e, c),
        fma(s, -2.0, e, c),
        fma(s, 4.0, d[1], fma(s, -5.0, d[3], d[5])),
    ]
}

/// Aᵀ applied to one column of six products.
#[inline(always)]
pub(super) fn at<S: Simd>(s: S, m: [S::F; 6]) -> [S::F; 4] {
    let s1 = s.add(m[1], m[2]);
    let d1 = s.sub(m[1], m[2]);
    let s2 = s.add(m[3], m[4]);
    let d2 = s.sub(m[3], m[4]);
    [
        s.add(s.add(m[0], s1), s2),
        fma(s, 2.0, d2, d1),
        fma(s, 4.0, s2, s1),
        s.add(fma(s, 8.0, d2, d1), m[5]),
    ]
}
