//! One LSTM step's gates for one batch row, after the product: a single pass over the hidden
//! units, written once over the SIMD layer, each vector of units taken from its four
//! pre-activations to its new `c` and `h` in registers (the activations of `simd::math`, the
//! runtime's vector ones). It replaces five activation calls and four scalar loops a step:
//! for a hidden size of 64 they took as long as the step's product with `Rᵀ`.

use crate::simd::{Simd, Walk, math};

/// The gates `g` (`[i o f ĉ]` pre-activations, `4·hidden`, the product and biases summed) of
/// one row, its cell state `c` (updated in place) and its new `h`: with peepholes `pp`
/// (`[i o f]`) added before the activations, each pre-activation clamped to `±clip` (when
/// finite), `f = 1 − i` with `input_forget`:
///
/// `i = σ(g_i + p_i⊙c)`, `f = σ(g_f + p_f⊙c)`, `ĉ = tanh(g_c)`, `c = f⊙c + i⊙ĉ`,
/// `o = σ(g_o + p_o⊙c)`, `h = o⊙tanh(c)`.
///
/// Every sum and product is rounded apart (no fused multiply-add), as the scalar loops before
/// it computed them.
#[derive(Clone, Copy)]
pub(super) struct LstmCell {
    pub hidden: usize,
    pub g: *const f32,
    pub c: *mut f32,
    pub h: *mut f32,
    /// `[i o f]` peepholes, `3·hidden`, or null.
    pub pp: *const f32,
    pub clip: f32,
    pub input_forget: bool,
}

impl Walk for LstmCell {
    type Out = ();
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        let (hd, l) = (self.hidden, S::LANES);
        let one = s.splat(1.0);
        let (lo, hi) = (s.splat(-self.clip), s.splat(self.clip));
        let clipped = self.clip.is_finite();
        // min/max return their second operand on NaN: a NaN goes through the clamp.
        let clamp = {
            #[inline(always)]
            |v| {
                if clipped { s.max(lo, s.min(hi, v)) } else { v }
            }
        };
        // The units k..k + LANES, or those of them in `m` (the last, partial vector: masked
        // loads and stores, which AVX2 on AMD microcodes, so only there).
        let units = {
            #[inline(always)]
            |k: usize, m: Option<S::M>| {
                // SAFETY: g holds 4·hd floats, c and h hd, pp 3·hd when not null (the caller's
                // contract); the lanes accessed are units below hd.
                unsafe {
                    let ld = {
                        #[inline(always)]
                        |p: *const f32, at: usize| match m {
                            None => s.load(p.add(at + k)),
                            Some(m) => s.load_or_zero(p.add(at + k), m),
                        }
                    };
                    let st = {
                        #[inline(always)]
                        |p: *mut f32, v| match m {
                            None => s.store(p.add(k), v),
                            Some(m) => s.store_masked(p.add(k), m, v),
                        }
                    };
                    let c = ld(self.c, 0);
                    let (mut gi, mut gf) = (ld(self.g, 0), ld(self.g, 2 * hd));
                    let mut go = ld(self.g, hd);
                    if !self.pp.is_null() {
                        gi = s.add(gi, s.mul(ld(self.pp, 0), c));
                        gf = s.add(gf, s.mul(ld(self.pp, 2 * hd), c));
                    }
                    let i = math::sigmoid(s, one, clamp(gi));
                    let f = if self.input_forget {
                        s.sub(one, i)
                    } else {
                        math::sigmoid(s, one, clamp(gf))
                    };
                    let cand = math::tanh(s, clamp(ld(self.g, 3 * hd)));
                    let c = s.add(s.mul(f, c), s.mul(i, cand));
                    if !self.pp.is_null() {
                        go = s.add(go, s.mul(ld(self.pp, hd), c));
                    }
                    let o = math::sigmoid(s, one, clamp(go));
                    st(self.c, c);
                    st(self.h, s.mul(o, math::tanh(s, c)));
                }
            }
        };
        let mut k = 0;
        while k + l <= hd {
            units(k, None);
            k += l;
        }
        if k < hd {
            units(k, Some(s.lanes(0, hd - k)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cell on every implementation (4, 8 and 16 lanes, AVX2 and AVX-512 where the CPU
    /// has them) against its formulas in f64, over hidden sizes around the vector widths,
    /// with and without peepholes, clip and `input_forget`.
    #[test]
    fn the_cell_matches_its_formulas_on_every_implementation() {
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        for (case, hd) in [1, 3, 4, 5, 8, 13, 16, 24, 33].into_iter().enumerate() {
            for variant in 0..4 {
                let (peep, forget) = (variant & 1 == 1, variant & 2 == 2);
                let clip = if variant == 1 { 0.75 } else { f32::INFINITY };
                let rand = |n, s| {
                    crate::test_rand(n, 100 * case as u64 + 10 * variant + s)
                        .into_iter()
                        .map(|v| 3.0 * v)
                        .collect::<Vec<f32>>()
                };
                let (g, c0, pp) = (rand(4 * hd, 1), rand(hd, 2), rand(3 * hd, 3));
                let cl = |v: f64| {
                    if clip.is_finite() {
                        v.clamp(-0.75, 0.75)
                    } else {
                        v
                    }
                };
                let at = |j: usize, k: usize| if peep { pp[j * hd + k] as f64 } else { 0.0 };
                let mut want = (vec![0f64; hd], vec![0f64; hd]);
                for k in 0..hd {
                    let (gv, c) = (|j: usize| g[j * hd + k] as f64, c0[k] as f64);
                    let i = sig(cl(gv(0) + at(0, k) * c));
                    let f = if forget {
                        1.0 - i
                    } else {
                        sig(cl(gv(2) + at(2, k) * c))
                    };
                    let c = f * c + i * cl(gv(3)).tanh();
                    let o = sig(cl(gv(1) + at(1, k) * c));
                    want.0[k] = c;
                    want.1[k] = o * c.tanh();
                }
                #[derive(Clone)]
                struct Run<'a>(LstmCell, &'a [f32], usize);
                impl Walk for Run<'_> {
                    type Out = (Vec<f32>, Vec<f32>);
                    unsafe fn run<S: Simd>(self, s: S) -> Self::Out {
                        let Run(mut w, c0, hd) = self;
                        // A NaN past the units: the cell must neither read nor write it.
                        let mut c = c0.to_vec();
                        c.push(f32::NAN);
                        let mut h = vec![f32::NAN; hd + 1];
                        h[hd] = 7.0;
                        (w.c, w.h) = (c.as_mut_ptr(), h.as_mut_ptr());
                        // SAFETY: g holds 4·hd floats, c and h hd + 1, pp 3·hd.
                        unsafe { w.run(s) };
                        assert!(c[hd].is_nan() && h[hd] == 7.0, "wrote past the units");
                        (c[..hd].to_vec(), h[..hd].to_vec())
                    }
                }
                let w = LstmCell {
                    hidden: hd,
                    g: g.as_ptr(),
                    c: std::ptr::null_mut(),
                    h: std::ptr::null_mut(),
                    pp: if peep { pp.as_ptr() } else { std::ptr::null() },
                    clip,
                    input_forget: forget,
                };
                let check = |isa: &str, (c, h): (Vec<f32>, Vec<f32>)| {
                    for k in 0..hd {
                        for (name, got, want) in [("c", c[k], want.0[k]), ("h", h[k], want.1[k])] {
                            assert!(
                                (got as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                                "{isa} hidden {hd} variant {variant} {name}[{k}]: {got} vs {want}"
                            );
                        }
                    }
                };
                // SAFETY: the walk's buffers are its own.
                unsafe { crate::simd::for_each_isa(Run(w, &c0, hd), check) };
            }
        }
    }
}
