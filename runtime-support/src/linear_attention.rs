//! LinearAttention (ONNX opset 27), float32: attention as a recurrence over a state
//! `S [dk, dv]` per (batch, key/value head) instead of a softmax over every pair of tokens.
//! At each time step `i`, with that head's key `k`, value `v`, decay `g` (log-space) and
//! β:
//!
//! - gated rules: `S[d, :] *= exp(g[d])` (a per-head `g` broadcast over `d`);
//! - delta rules: `v ← β·(v − Sᵀk)`, the value minus what the state already retrieves for
//!   the key, summed over `d` in increasing order;
//! - every rule: `S[d, m] += k[d]·v[m]`;
//! - every query head `h` of the key/value head's group (`h = kvh·group + j`, grouped and
//!   multi-query attention share the state): `out[h, m] = scale · Σ_d q_h[d]·S[d, m]`.
//!
//! The final states follow the outputs in `y`. This is onnx's reference evaluator's
//! definition (`op_linear_attention.py`) in float32 and its order of operations; its sums
//! (`einsum`) have no order of their own, so results agree with it to rounding.
//!
//! The (batch, key/value head) pairs are independent: they are split over the run's
//! threads, each pair's state and outputs written by one task with the same operations
//! whatever the split, so results are bit-identical for any worker count. A pair's state
//! lives in its place in `y` throughout (copied from `past` or zeroed first), and the delta
//! rules' corrected value goes through the first output slot of the group before that
//! step's outputs overwrite it: the kernel needs no scratch. The loops over `m` are
//! element-wise (no reassociation), compiled per ISA with `multiversion!`: every ISA
//! gives the same bits.

use crate::abi::{ONNXC_ERR_PARAMS, ONNXC_OK, elements, elements_mut};
use crate::kernels::Status;
use crate::par::{Par, Threads};
use crate::params::{self, ParamError};

/// Words of `onnxc_linear_attention_f32`'s parameters (its blob's body).
pub const PARAMS: usize = 10;

/// The state update of ONNX's `update_rule` attribute, with its code in the blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `"linear"`: `S += k ⊗ v`.
    Linear = 0,
    /// `"gated"`: `S ← exp(g)·S + k ⊗ v`.
    Gated = 1,
    /// `"delta"`: `S += k ⊗ β(v − Sᵀk)`.
    Delta = 2,
    /// `"gated_delta"` (ONNX's default): the decay, then the delta update.
    GatedDelta = 3,
}

impl Rule {
    /// The rule of ONNX's attribute value (`"linear"`, `"gated"`, `"delta"`,
    /// `"gated_delta"`).
    pub fn from_name(name: &str) -> Option<Rule> {
        Some(match name {
            "linear" => Rule::Linear,
            "gated" => Rule::Gated,
            "delta" => Rule::Delta,
            "gated_delta" => Rule::GatedDelta,
            _ => return None,
        })
    }

    /// The rule of blob code `code`.
    pub fn from_code(code: i64) -> Option<Rule> {
        [Rule::Linear, Rule::Gated, Rule::Delta, Rule::GatedDelta]
            .into_iter()
            .find(|r| *r as i64 == code)
    }

    /// The state decays by `exp(decay)` before each update (the `decay` input is required).
    pub fn gated(self) -> bool {
        matches!(self, Rule::Gated | Rule::GatedDelta)
    }

    /// The value is corrected by what the state retrieves (the `beta` input is required).
    pub fn delta(self) -> bool {
        matches!(self, Rule::Delta | Rule::GatedDelta)
    }
}

/// `onnxc_linear_attention_f32`'s parameters, decoded and validated. Layouts (row-major):
/// `q [b, t, hq·dk]`, `k [b, t, hkv·dk]`, `v [b, t, hkv·dv]`, `past [b, hkv, dk, dv]`,
/// `decay [b, t, hkv]` or `[b, t, hkv·dk]`, `beta [b, t, hkv]` or `[b, t, 1]`; `y`: the
/// output `[b, t, hq·dv]`, then the final state `[b, hkv, dk, dv]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearAttentionParams {
    pub b: usize,
    /// Time steps; 0 gives an empty output and the state `past` (or zeros).
    pub t: usize,
    /// Query heads, a multiple of `hkv`.
    pub hq: usize,
    /// Key/value heads.
    pub hkv: usize,
    pub dk: usize,
    pub dv: usize,
    pub rule: Rule,
    /// `decay`'s last dim is `hkv·dk` (one decay per key dim) rather than `hkv`; read by
    /// the gated rules only.
    pub decay_per_key: bool,
    /// `beta`'s last dim is `hkv` rather than 1 (one β for every head); read by the delta
    /// rules only.
    pub beta_per_head: bool,
    /// The state starts from `past` (else from zeros).
    pub has_past: bool,
}

impl LinearAttentionParams {
    /// The sealed blob (`params::seal`) of `[b, t, hq, hkv, dk, dv, rule, decay_per_key,
    /// beta_per_head, has_past]`.
    pub fn encode(&self) -> Vec<i64> {
        params::seal([
            self.b as i64,
            self.t as i64,
            self.hq as i64,
            self.hkv as i64,
            self.dk as i64,
            self.dv as i64,
            self.rule as i64,
            self.decay_per_key as i64,
            self.beta_per_head as i64,
            self.has_past as i64,
        ])
    }

    /// Decodes and checks `blob`: `b` and `t` not negative, the heads and head sizes
    /// positive, `hq` a multiple of `hkv`, a known rule, flags 0 or 1, and every tensor
    /// (the output and state together) of a size that fits in memory.
    pub fn decode(blob: &[i64]) -> params::Result<LinearAttentionParams> {
        use params::{ensure, flag, in_range, product};
        let mut r = params::Reader::new(blob)?;
        let [b, t, hq, hkv, dk, dv, rule, per_key, per_head, past] = r.array()?;
        r.finish()?;
        for v in [b, t] {
            in_range(v, 0, params::MAX_WORDS, "a count is out of range")?;
        }
        for v in [hq, hkv, dk, dv] {
            in_range(
                v,
                1,
                params::MAX_WORDS,
                "a head count or size is out of range",
            )?;
        }
        ensure(
            hq % hkv == 0,
            "q_num_heads is not a multiple of kv_num_heads",
        )?;
        let rule = Rule::from_code(rule).ok_or(ParamError("unknown update rule"))?;
        let too_big = "a tensor is too large";
        product([b, t, hq, dk, 4], too_big)?;
        product([b, t, hkv, dk, 4], too_big)?;
        product([b, t, hkv, dv, 4], too_big)?;
        let out = product([b, t, hq, dv], too_big)?;
        let state = product([b, hkv, dk, dv], too_big)?;
        product(
            [out.checked_add(state).ok_or(ParamError(too_big))?, 4],
            too_big,
        )?;
        Ok(LinearAttentionParams {
            b: b as usize,
            t: t as usize,
            hq: hq as usize,
            hkv: hkv as usize,
            dk: dk as usize,
            dv: dv as usize,
            rule,
            decay_per_key: flag(per_key, "decay_per_key is not 0 or 1")?,
            beta_per_head: flag(per_head, "beta_per_head is not 0 or 1")?,
            has_past: flag(past, "has_past is not 0 or 1")?,
        })
    }

    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.hq / self.hkv
    }

    /// Floats of `q`.
    pub fn q_len(&self) -> usize {
        self.b * self.t * self.hq * self.dk
    }

    /// Floats of `k`.
    pub fn k_len(&self) -> usize {
        self.b * self.t * self.hkv * self.dk
    }

    /// Floats of `v`.
    pub fn v_len(&self) -> usize {
        self.b * self.t * self.hkv * self.dv
    }

    /// Floats of `decay` (read by the gated rules).
    pub fn decay_len(&self) -> usize {
        self.b * self.t * self.hkv * if self.decay_per_key { self.dk } else { 1 }
    }

    /// Floats of `beta` (read by the delta rules).
    pub fn beta_len(&self) -> usize {
        self.b * self.t * if self.beta_per_head { self.hkv } else { 1 }
    }

    /// Floats of the output, `[b, t, hq·dv]`: the state's offset in `y`.
    pub fn output_len(&self) -> usize {
        self.b * self.t * self.hq * self.dv
    }

    /// Floats of a state, `past` or the final one: `[b, hkv, dk, dv]`.
    pub fn state_len(&self) -> usize {
        self.b * self.hkv * self.dk * self.dv
    }
}

/// LinearAttention of `p` (the module's definition): the output, then the final state,
/// into `y` (`output_len() + state_len()` floats), the (batch, key/value head) pairs split
/// over `par`. `scale` multiplies the outputs (ONNX's `scale`, or its default `1/√dk`,
/// resolved by the caller). `past` is read when `p.has_past`, `decay` by the gated rules,
/// `beta` by the delta rules, and ignored otherwise. Refuses, writing nothing, when an
/// input that is read is `None`.
///
/// # Panics
/// When a slice's length is not the one `p` gives it (`q_len()`, …).
#[allow(clippy::too_many_arguments)]
pub fn linear_attention_f32(
    p: &LinearAttentionParams,
    scale: f32,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    past: Option<&[f32]>,
    decay: Option<&[f32]>,
    beta: Option<&[f32]>,
    y: &mut [f32],
    par: Par,
) -> params::Result<()> {
    let past = if p.has_past {
        Some(past.ok_or(ParamError("past_state is missing"))?)
    } else {
        None
    };
    let decay = if p.rule.gated() {
        Some(decay.ok_or(ParamError("the rule needs decay"))?)
    } else {
        None
    };
    let beta = if p.rule.delta() {
        Some(beta.ok_or(ParamError("the rule needs beta"))?)
    } else {
        None
    };
    assert_eq!(q.len(), p.q_len(), "q");
    assert_eq!(k.len(), p.k_len(), "k");
    assert_eq!(v.len(), p.v_len(), "v");
    assert_eq!(y.len(), p.output_len() + p.state_len(), "y");
    assert!(past.is_none_or(|s| s.len() == p.state_len()), "past");
    assert!(decay.is_none_or(|s| s.len() == p.decay_len()), "decay");
    assert!(beta.is_none_or(|s| s.len() == p.beta_len()), "beta");
    let (dk, dv, group) = (p.dk, p.dv, p.group());
    let size = dk * dv;
    let (output_len, y) = (p.output_len(), y.as_mut_ptr());
    // One (batch, key/value head) pair: its state, then each time step.
    let pair = |pair: usize| {
        let (bi, kvh) = (pair / p.hkv, pair % p.hkv);
        // SAFETY: the pair's state, `[bi, kvh]` of the states after the output, lies inside
        // `y` (whose length was checked); only this pair's task accesses it.
        let s = unsafe { std::slice::from_raw_parts_mut(y.add(output_len + pair * size), size) };
        match past {
            Some(past) => s.copy_from_slice(&past[pair * size..][..size]),
            None => s.fill(0.0),
        }
        for i in 0..p.t {
            let row = bi * p.t + i;
            let head = row * p.hkv + kvh;
            let first = (row * p.hq + kvh * group) * dv;
            // SAFETY: the outputs of query heads kvh·group.. of row `row` lie inside `y`'s
            // output; only this pair's task accesses them.
            let out = unsafe { std::slice::from_raw_parts_mut(y.add(first), group * dv) };
            let step = Step {
                q: &q[(row * p.hq + kvh * group) * dk..][..group * dk],
                k: &k[head * dk..][..dk],
                v: &v[head * dv..][..dv],
                decay: decay.map(|d| {
                    if p.decay_per_key {
                        Decay::PerKey(&d[head * dk..][..dk])
                    } else {
                        Decay::PerHead(d[head])
                    }
                }),
                beta: beta.map(|b| b[if p.beta_per_head { head } else { row }]),
                scale,
            };
            crate::multiversion!(update(s, out, &step));
        }
    };
    let cost = p.t.saturating_mul(size).saturating_mul(group + 3);
    // SAFETY: each task runs its own pairs, which write only their own state and outputs.
    unsafe { par.for_ranges(p.b * p.hkv, cost, &|pairs, _| pairs.for_each(&pair)) };
    Ok(())
}

/// One time step's operands for one (batch, key/value head) pair.
struct Step<'a> {
    /// The group's queries, `[group, dk]`.
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    decay: Option<Decay<'a>>,
    beta: Option<f32>,
    scale: f32,
}

/// A time step's log-space decay for one key/value head.
#[derive(Clone, Copy)]
enum Decay<'a> {
    PerHead(f32),
    PerKey(&'a [f32]),
}

/// One time step of a pair: its state `s` `[dk, dv]` updated, then the outputs `out`
/// `[group, dv]` of its query heads.
#[inline(always)]
fn update(s: &mut [f32], out: &mut [f32], x: &Step) {
    let dv = x.v.len();
    match x.decay {
        Some(Decay::PerHead(g)) => scale_row(s, g.exp()),
        Some(Decay::PerKey(g)) => {
            for (sd, &gd) in s.chunks_exact_mut(dv).zip(g) {
                scale_row(sd, gd.exp());
            }
        }
        None => {}
    }
    // The corrected value goes through the first query head's output slot.
    let (first, _) = out.split_at_mut(dv);
    let v: &[f32] = match x.beta {
        Some(b) => {
            first.fill(0.0);
            for (sd, &kd) in s.chunks_exact(dv).zip(x.k) {
                for (r, &sm) in first.iter_mut().zip(sd) {
                    *r += sm * kd;
                }
            }
            for (r, &vm) in first.iter_mut().zip(x.v) {
                *r = b * (vm - *r);
            }
            first
        }
        None => x.v,
    };
    for (sd, &kd) in s.chunks_exact_mut(dv).zip(x.k) {
        for (sm, &vm) in sd.iter_mut().zip(v) {
            *sm += kd * vm;
        }
    }
    let dk = x.k.len();
    for (o, q) in out.chunks_exact_mut(dv).zip(x.q.chunks_exact(dk)) {
        o.fill(0.0);
        for (sd, &qd) in s.chunks_exact(dv).zip(q) {
            for (r, &sm) in o.iter_mut().zip(sd) {
                *r += qd * sm;
            }
        }
        scale_row(o, x.scale);
    }
}

#[inline(always)]
fn scale_row(row: &mut [f32], by: f32) {
    for x in row {
        *x *= by;
    }
}

/// `params`: `LinearAttentionParams::encode`'s blob; `scale`: one float (the outputs'
/// factor); `q`, `k`, `v`, `past`, `decay`, `beta`, `y` as `LinearAttentionParams` lays
/// them out. `past` is read when the blob's `has_past` is 1, `decay` by the gated rules,
/// `beta` by the delta rules (each may be null otherwise). Returns `ONNXC_ERR_PARAMS`,
/// touching nothing, when the blob is not valid or `scale` or an input that is read is
/// null.
///
/// # Safety
/// `params` points to a sealed blob (`params::blob`); the other pointers are null or hold
/// the elements it describes; `y` overlaps no input; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_linear_attention_f32(
    params: *const i64,
    scale: *const f32,
    q: *const f32,
    k: *const f32,
    v: *const f32,
    past: *const f32,
    decay: *const f32,
    beta: *const f32,
    y: *mut f32,
    threads: *const Threads,
) -> Status {
    let p = params::decode_blob!(params, LinearAttentionParams::decode);
    // SAFETY: (each) a non-null pointer holds the floats the parameters give it (contract).
    let (scale, q, k, v) = unsafe {
        (
            elements(scale, 1),
            elements(q, p.q_len()),
            elements(k, p.k_len()),
            elements(v, p.v_len()),
        )
    };
    let (Some(scale), Some(q), Some(k), Some(v)) = (scale, q, k, v) else {
        return ONNXC_ERR_PARAMS;
    };
    // SAFETY: as above; an input the rule does not read is not touched.
    let (past, decay, beta) = unsafe {
        (
            p.has_past.then(|| elements(past, p.state_len())).flatten(),
            p.rule
                .gated()
                .then(|| elements(decay, p.decay_len()))
                .flatten(),
            p.rule
                .delta()
                .then(|| elements(beta, p.beta_len()))
                .flatten(),
        )
    };
    let len = p.output_len() + p.state_len();
    // SAFETY: a non-null y holds the output and the state (contract).
    let Some(y) = (unsafe { elements_mut(y, len) }) else {
        return ONNXC_ERR_PARAMS;
    };
    // SAFETY: the caller's contract.
    let par = unsafe { Par::from_raw(threads) };
    match linear_attention_f32(&p, scale[0], q, k, v, past, decay, beta, y, par) {
        Ok(()) => ONNXC_OK,
        Err(_) => ONNXC_ERR_PARAMS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::par::same_bits_on_every_pool;

    /// The inputs of a call; `None` where the parameters read nothing.
    struct Inputs {
        q: Vec<f32>,
        k: Vec<f32>,
        v: Vec<f32>,
        past: Option<Vec<f32>>,
        decay: Option<Vec<f32>>,
        beta: Option<Vec<f32>>,
    }

    /// Pseudo-random inputs for `p`: decays in (−0.5, 0], β in (0, 1).
    fn inputs(p: &LinearAttentionParams, seed: u64) -> Inputs {
        let rand = |n, s| crate::test_rand(n, seed * 8 + s);
        Inputs {
            q: rand(p.q_len(), 1),
            k: rand(p.k_len(), 2),
            v: rand(p.v_len(), 3),
            past: p.has_past.then(|| rand(p.state_len(), 4)),
            decay: p.rule.gated().then(|| {
                let d = rand(p.decay_len(), 5);
                d.iter().map(|v| -0.25 * (v + 1.0)).collect()
            }),
            beta: p.rule.delta().then(|| {
                let b = rand(p.beta_len(), 6);
                b.iter().map(|v| 0.5 * (v + 1.0)).collect()
            }),
        }
    }

    /// The definition in float64, indexing the ONNX layouts directly: the output, then the
    /// state.
    fn reference(p: &LinearAttentionParams, scale: f32, x: &Inputs) -> Vec<f64> {
        let (t, hq, hkv, dk, dv) = (p.t, p.hq, p.hkv, p.dk, p.dv);
        let group = hq / hkv;
        let mut y = vec![0f64; p.output_len() + p.state_len()];
        for b in 0..p.b {
            for kvh in 0..hkv {
                let mut s = vec![vec![0f64; dv]; dk];
                if let Some(past) = &x.past {
                    for (d, row) in s.iter_mut().enumerate() {
                        for (m, v) in row.iter_mut().enumerate() {
                            *v = past[((b * hkv + kvh) * dk + d) * dv + m] as f64;
                        }
                    }
                }
                for i in 0..t {
                    let row = b * t + i;
                    let kk = |d: usize| x.k[(row * hkv + kvh) * dk + d] as f64;
                    if let Some(decay) = &x.decay {
                        for (d, sd) in s.iter_mut().enumerate() {
                            let g = if p.decay_per_key {
                                decay[(row * hkv + kvh) * dk + d]
                            } else {
                                decay[row * hkv + kvh]
                            };
                            sd.iter_mut().for_each(|v| *v *= (g as f64).exp());
                        }
                    }
                    let mut vv: Vec<f64> = (0..dv)
                        .map(|m| x.v[(row * hkv + kvh) * dv + m] as f64)
                        .collect();
                    if let Some(beta) = &x.beta {
                        let bt = if p.beta_per_head {
                            beta[row * hkv + kvh]
                        } else {
                            beta[row]
                        } as f64;
                        for (m, v) in vv.iter_mut().enumerate() {
                            let r: f64 = (0..dk).map(|d| s[d][m] * kk(d)).sum();
                            *v = bt * (*v - r);
                        }
                    }
                    for (d, sd) in s.iter_mut().enumerate() {
                        for (v, u) in sd.iter_mut().zip(&vv) {
                            *v += kk(d) * u;
                        }
                    }
                    for j in 0..group {
                        let h = kvh * group + j;
                        for m in 0..dv {
                            let dot: f64 = (0..dk)
                                .map(|d| x.q[(row * hq + h) * dk + d] as f64 * s[d][m])
                                .sum();
                            y[(row * hq + h) * dv + m] = scale as f64 * dot;
                        }
                    }
                }
                for (d, sd) in s.iter().enumerate() {
                    for (m, v) in sd.iter().enumerate() {
                        y[p.output_len() + ((b * hkv + kvh) * dk + d) * dv + m] = *v;
                    }
                }
            }
        }
        y
    }

    /// `onnxc_linear_attention_f32` on `threads`: the output and state (NaN where not
    /// written), and the status.
    fn run(
        p: &LinearAttentionParams,
        scale: f32,
        x: &Inputs,
        threads: *const Threads,
    ) -> (Vec<f32>, Status) {
        let ptr = |v: &Option<Vec<f32>>| v.as_ref().map_or(std::ptr::null(), |v| v.as_ptr());
        let mut y = vec![f32::NAN; p.output_len() + p.state_len()];
        let blob = p.encode();
        // SAFETY: a sealed blob; the buffers hold what it describes; threads from the tests.
        let status = unsafe {
            onnxc_linear_attention_f32(
                blob.as_ptr(),
                &scale,
                x.q.as_ptr(),
                x.k.as_ptr(),
                x.v.as_ptr(),
                ptr(&x.past),
                ptr(&x.decay),
                ptr(&x.beta),
                y.as_mut_ptr(),
                threads,
            )
        };
        (y, status)
    }

    fn check(p: &LinearAttentionParams, scale: f32, seed: u64) {
        let x = inputs(p, seed);
        let (y, status) = run(p, scale, &x, std::ptr::null());
        assert_eq!(status, ONNXC_OK, "{p:?}");
        let want = reference(p, scale, &x);
        let tol = 1e-5 * want.iter().fold(1f64, |m, v| m.max(v.abs()));
        for (i, (&g, &w)) in y.iter().zip(&want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= tol,
                "{p:?} [{i}]: got {g}, want {w}"
            );
        }
    }

    fn params(
        b: usize,
        t: usize,
        hq: usize,
        hkv: usize,
        dk: usize,
        dv: usize,
    ) -> LinearAttentionParams {
        LinearAttentionParams {
            b,
            t,
            hq,
            hkv,
            dk,
            dv,
            rule: Rule::Linear,
            decay_per_key: false,
            beta_per_head: false,
            has_past: false,
        }
    }

    const RULES: [Rule; 4] = [Rule::Linear, Rule::Gated, Rule::Delta, Rule::GatedDelta];

    /// Every rule; multi-head, grouped (4 query heads on 2) and multi-query (3 on 1); decay
    /// per head and per key, β per head and shared; with and without a past state; prefill,
    /// one decode step and no step.
    #[test]
    fn matches_the_definition() {
        for rule in RULES {
            for (hq, hkv) in [(2, 2), (4, 2), (3, 1)] {
                for t in [0, 1, 5] {
                    for flags in 0..8 {
                        let p = LinearAttentionParams {
                            rule,
                            decay_per_key: flags & 1 != 0,
                            beta_per_head: flags & 2 != 0,
                            has_past: flags & 4 != 0,
                            ..params(2, t, hq, hkv, 3, 5)
                        };
                        check(&p, 0.6, (t * 8 + flags) as u64);
                    }
                }
            }
        }
        // Rows longer than vectors, with tails.
        for rule in RULES {
            let p = LinearAttentionParams {
                rule,
                decay_per_key: true,
                beta_per_head: true,
                has_past: true,
                ..params(1, 7, 6, 2, 8, 37)
            };
            check(&p, 1.0 / 8f32.sqrt(), 11);
        }
    }

    /// No time steps: an empty output and the past state (or zeros).
    #[test]
    fn no_steps_give_the_past_state() {
        for has_past in [false, true] {
            let p = LinearAttentionParams {
                rule: Rule::GatedDelta,
                has_past,
                ..params(2, 0, 2, 1, 3, 4)
            };
            let x = inputs(&p, 1);
            let (y, status) = run(&p, 1.0, &x, std::ptr::null());
            assert_eq!(status, ONNXC_OK);
            match x.past {
                Some(past) => assert_eq!(y, past),
                None => assert!(y.iter().all(|&v| v.to_bits() == 0)),
            }
        }
    }

    /// onnx's reference evaluator (`op_linear_attention.py`, scale 0.5, gated_delta, GQA
    /// 4 on 2 heads, decay per key, β per head, a past state) on exact inputs: `f(i, s, m)
    /// = ((7i + s) mod m − ⌊m/2⌋)/8` for `q` (s = 1), `k` (2), `v` (3) with m = 13 and
    /// `past` (4, m = 11); decay `−((5i mod 7) + 1)/16`; β `((i mod 3) + 1)/4`.
    #[test]
    fn matches_onnx_reference() {
        let p = LinearAttentionParams {
            rule: Rule::GatedDelta,
            decay_per_key: true,
            beta_per_head: true,
            has_past: true,
            ..params(2, 3, 4, 2, 2, 3)
        };
        let f = |n: usize, s: usize, m: usize| -> Vec<f32> {
            (0..n)
                .map(|i| (((i * 7 + s) % m) as f32 - (m / 2) as f32) * 0.125)
                .collect()
        };
        let x = Inputs {
            q: f(p.q_len(), 1, 13),
            k: f(p.k_len(), 2, 13),
            v: f(p.v_len(), 3, 13),
            past: Some(f(p.state_len(), 4, 11)),
            decay: Some(
                (0..p.decay_len())
                    .map(|i| -(((i * 5) % 7) as f32 + 1.0) * 0.0625)
                    .collect(),
            ),
            beta: Some(
                (0..p.beta_len())
                    .map(|i| ((i % 3) as f32 + 1.0) * 0.25)
                    .collect(),
            ),
        };
        #[rustfmt::skip]
        let want = [
            -0.003534466, 0.23947653, -0.071021, -0.020891275, 0.22953936, -0.050651368,
            0.016332604, -0.0043842494, 0.05105049, -0.02662316, 0.040072564, 0.04730113,
            -0.03822012, -0.052820068, 0.034150966, 0.042067364, 0.064506486, -0.04288876,
            0.08279544, -0.07014409, 0.0005716188, 0.040640358, -0.030419752, -0.0075706197,
            0.030208554, -0.03240886, 0.041168652, 0.0148506975, -0.037669808, 0.039456554,
            -0.10099346, 0.12399551, -0.035763312, -0.12513447, 0.13818148, -0.03973212,
            0.16875052, -0.062302426, 0.07602475, 0.1681675, -0.044417925, 0.048521146,
            -0.07283486, 0.037803963, 0.015142001, -0.027369857, 0.032434516, -0.041061893,
            0.16989619, -0.02389089, 0.0015026145, 0.16877356, -0.0054716347, -0.025076201,
            -0.06450465, -0.012545091, 0.14028287, -0.031234704, -0.017349344, 0.107284404,
            -0.12573558, 0.047952347, 0.0048481617, -0.12110618, 0.0771413, -0.013524357,
            0.13367799, -0.032095898, 0.111727536, 0.17454994, -0.037107136, 0.106476046,
            // The final state.
            -0.042306717, -0.12851119, 0.09608627, -0.20341901, 0.044336066, -0.12347988,
            -0.3336919, 0.36848396, -0.10595232, -0.052564025, -0.14150828, 0.042451374,
            -0.2859146, 0.4392218, -0.18304512, 0.35998505, 0.02780152, -0.11091521,
            0.57445836, -0.112315685, 0.26993215, 0.079492845, 0.032135807, -0.35395595,
        ];
        let (y, status) = run(&p, 0.5, &x, std::ptr::null());
        assert_eq!(status, ONNXC_OK);
        assert_eq!(y.len(), want.len());
        for (i, (g, w)) in y.iter().zip(want).enumerate() {
            assert!((g - w).abs() <= 1e-6, "[{i}]: got {g}, want {w}");
        }
    }

    #[test]
    fn threads_give_the_same_bits() {
        for rule in RULES {
            for (b, hq, hkv) in [(3, 8, 4), (1, 5, 5), (2, 4, 1)] {
                let p = LinearAttentionParams {
                    rule,
                    decay_per_key: true,
                    has_past: true,
                    ..params(b, 6, hq, hkv, 16, 24)
                };
                let x = inputs(&p, 7);
                same_bits_on_every_pool(&format!("{p:?}"), |_, threads| {
                    let (y, status) = run(&p, 0.25, &x, threads);
                    assert_eq!(status, ONNXC_OK);
                    y
                });
            }
        }
    }

    #[test]
    fn calls_do_not_allocate() {
        let p = LinearAttentionParams {
            rule: Rule::GatedDelta,
            ..params(2, 4, 4, 2, 8, 8)
        };
        let x = inputs(&p, 2);
        let mut y = vec![0f32; p.output_len() + p.state_len()];
        // The process's first call detects the CPU, reading `ONNXC_RUNTIME_ISA`.
        check(&p, 0.3, 2);
        let (r, allocations) = crate::allocations_during(|| {
            linear_attention_f32(
                &p,
                0.3,
                &x.q,
                &x.k,
                &x.v,
                None,
                x.decay.as_deref(),
                x.beta.as_deref(),
                &mut y,
                Par::SEQ,
            )
        });
        assert_eq!((r, allocations), (Ok(()), 0));
    }

    /// Corrupt blobs, and inputs missing that the blob says are read, are refused before
    /// anything is written.
    #[test]
    fn refuses_corrupt_blobs_and_missing_inputs() {
        let good = LinearAttentionParams {
            rule: Rule::GatedDelta,
            has_past: true,
            ..params(1, 2, 2, 1, 2, 2)
        };
        assert_eq!(LinearAttentionParams::decode(&good.encode()), Ok(good));
        let words = good.encode();
        let with = |k: usize, v: i64| params::with_word(&words, k, v);
        let bad = [
            params::short_blob(&words),
            params::long_blob(&words),
            with(0, -1),
            with(1, -1),
            with(2, 0),
            {
                // 3 query heads on 2.
                let mut b = with(2, 3);
                b[4] = 2;
                b
            },
            with(3, 0),
            with(4, 0),
            with(5, 0),
            with(6, 4),
            with(6, -1),
            with(7, 2),
            with(8, -1),
            with(9, 2),
            with(1, 1 << 40),
            {
                let mut b = with(0, 1 << 20);
                (b[2], b[5], b[6]) = (1 << 20, 1 << 20, 1 << 10);
                b
            },
        ];
        let input = [0.5f32; 8];
        let mut y = [-9f32; 16];
        let call = |blob: &[i64],
                    scale: *const f32,
                    past: *const f32,
                    decay: *const f32,
                    beta: *const f32,
                    y: &mut [f32]| {
            // SAFETY: a sealed blob; the non-null buffers hold at least what it describes.
            unsafe {
                onnxc_linear_attention_f32(
                    blob.as_ptr(),
                    scale,
                    input.as_ptr(),
                    input.as_ptr(),
                    input.as_ptr(),
                    past,
                    decay,
                    beta,
                    y.as_mut_ptr(),
                    std::ptr::null(),
                )
            }
        };
        let (past, decay, beta) = (input.as_ptr(), input.as_ptr(), input.as_ptr());
        let (null, one): (*const f32, *const f32) = (std::ptr::null(), &1.0);
        for (i, b) in bad.iter().enumerate() {
            assert!(LinearAttentionParams::decode(b).is_err(), "case {i}");
            assert_eq!(
                call(b, &1.0, past, decay, beta, &mut y),
                ONNXC_ERR_PARAMS,
                "case {i}"
            );
        }
        // A valid blob: no scale, no past although has_past, no decay for a gated rule, no
        // β for a delta rule.
        for (scale, past, decay, beta) in [
            (null, past, decay, beta),
            (one, null, decay, beta),
            (one, past, null, beta),
            (one, past, decay, null),
        ] {
            assert_eq!(
                call(&words, scale, past, decay, beta, &mut y),
                ONNXC_ERR_PARAMS
            );
        }
        assert!(y.iter().all(|&v| v == -9.0), "the output was written");
        // What a rule does not read may be null.
        let linear = LinearAttentionParams {
            rule: Rule::Linear,
            ..good
        }
        .encode();
        assert_eq!(call(&linear, &1.0, past, null, null, &mut y), ONNXC_OK);
    }
}
