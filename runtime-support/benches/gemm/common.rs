//! What every section shares: aligned buffers, test data, timing and the packed-A product.

use super::*;

/// A 64-byte-aligned float buffer, as the compiled model's workspace and constants are
/// (a plain `Vec<f32>` is only 16-byte aligned, so every 64-byte load would split a line).
pub(crate) struct Buf {
    lines: Vec<Line>,
    len: usize,
}

#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(crate) struct Line([f32; 16]);

impl Buf {
    pub(crate) fn zeros(len: usize) -> Buf {
        Buf {
            lines: vec![Line([0.0; 16]); len.div_ceil(16)],
            len,
        }
    }
}

impl std::ops::Deref for Buf {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        // SAFETY: `lines` holds at least `len` contiguous floats.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast(), self.len) }
    }
}

impl std::ops::DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut [f32] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast(), self.len) }
    }
}

pub(crate) fn data(n: usize) -> Buf {
    let mut b = Buf::zeros(n);
    for (i, v) in b.iter_mut().enumerate() {
        *v = ((i * 7919) % 1000) as f32 / 1000.0 - 0.5;
    }
    b
}

pub(crate) fn gflops(m: usize, n: usize, k: usize, secs: f64) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64 / secs / 1e9
}

/// Seconds per call of `f(rep)`: the best of `rounds` batches of `reps` calls (a slow spell
/// of the machine slows a batch and never speeds one up).
pub(crate) fn best_per_call(rounds: usize, reps: usize, mut f: impl FnMut(usize)) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        for rep in 0..reps {
            f(rep);
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    best
}

/// The operands of an m × n × k product: `(a, b, a packed, b packed, c, scratch)`, A and B
/// row-major test data, C zero, the scratch `gemm_packed_a` needs with B read in place.
pub(crate) fn operands(m: usize, n: usize, k: usize) -> (Buf, Buf, Buf, Buf, Buf, Buf) {
    let (a, b) = (data(m * k), data(k * n));
    let mut ap = Buf::zeros(pack::packed_a_len(m, k));
    let mut bp = Buf::zeros(pack::packed_b_len(k, n));
    // SAFETY: a holds m·k floats, ap packed_a_len(m, k), b k·n, bp packed_b_len(k, n).
    unsafe {
        pack::pack_a(a.as_ptr(), k, false, m, k, ap.as_mut_ptr());
        pack::pack_b(b.as_ptr(), n, false, k, n, bp.as_mut_ptr());
    }
    let (c, scratch) = (Buf::zeros(m * n), Buf::zeros(gemm::scratch_len(n, false)));
    (a, b, ap, bp, c, scratch)
}

/// C (m × n) = A·B with A packed (`ap`) and B (k × n) packed (`bp`) or row-major (`b`), as
/// `b_packed` says, through `gemm_packed_a` without an epilogue.
pub(crate) fn packed_a_gemm(
    (m, n, k): (usize, usize, usize),
    ap: &Buf,
    (b, bp, b_packed): (&Buf, &Buf, bool),
    c: &mut Buf,
    scratch: &mut Buf,
) {
    assert!(ap.len() >= pack::packed_a_len(m, k) && c.len() >= m * n);
    assert!(b.len() >= k * n && bp.len() >= pack::packed_b_len(k, n));
    assert!(scratch.len() >= gemm::scratch_len(n, false));
    let src = if b_packed {
        BSource::Packed(bp.as_ptr())
    } else {
        BSource::Matrix {
            b: b.as_ptr(),
            ldb: n,
            trans: false,
        }
    };
    // SAFETY: the buffers hold what the dims need (checked above).
    unsafe {
        gemm::gemm_packed_a(
            onnxc_runtime::par::Par::SEQ,
            m,
            n,
            k,
            ap.as_ptr(),
            src,
            c.as_mut_ptr(),
            n,
            &Epilogue::NONE,
            onnxc_runtime::par::Slots::single(scratch.as_mut_ptr()),
        )
    };
    black_box(c[0]);
}

/// The median of `v`.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}
