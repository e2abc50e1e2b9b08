//! `ONNXC_QGEMM`: the integer product and integer convolutions.

use super::*;

/// `ONNXC_QGEMM=1`: the integer matrix product (`onnxc_qmatmul`'s kernel, int32 output) at
/// 512×512×512 and a few model shapes, single thread, against the measured VNNI peak.
pub(crate) fn qgemm_table() {
    use onnxc_runtime::par::Par;
    use onnxc_runtime::qconv::matmul::{QMatMulParams, qmatmul};
    use onnxc_runtime::qconv::{QOut, QScalars};
    let peak = measured_int8_peak();
    println!("measured single-core int8 peak (vpdpbusd): {peak:.1} GMAC/s");
    println!(
        "{:>6} {:>6} {:>6} {:>10} {:>6}",
        "M", "N", "K", "GMAC/s", "%peak"
    );
    for (m, n, k) in [
        (512, 512, 512),
        (128, 768, 768),
        (128, 3072, 768),
        (1, 1000, 2048),
    ] {
        let q = QScalars {
            out: QOut::I32,
            x_signed: false,
            x_zp: 7,
            y_zp: 0,
            lo: 0,
            hi: 0,
        };
        let w: Vec<i8> = (0..k * n).map(|i| ((i * 7919) % 255) as i8).collect();
        let blob =
            QMatMulParams::encode(q, k, n, &w, &vec![0; n], None, &vec![1.0; n], &vec![0.0; n]);
        // The rows are the call's (`onnxc_qmatmul`'s `rows`), not the blob's.
        let p = QMatMulParams::decode(&blob)
            .and_then(|p| p.with_rows(m as i64))
            .expect("valid");
        let a: Vec<u8> = (0..m * k).map(|i| (i * 31 % 251) as u8).collect();
        let mut y = vec![0u8; m * n * 4];
        let need = p.scratch();
        let mut scratch = Buf::zeros(need.single() / 4 + 16);
        let (shared, slots) = need.layout(scratch.as_mut_ptr());
        let reps = (2e8 / (m * n * k) as f64).ceil() as usize;
        let secs = best_per_call(10, reps, |_| {
            // SAFETY: a, y and the scratch hold what the blob describes.
            unsafe {
                qmatmul(
                    &p,
                    7,
                    a.as_ptr(),
                    y.as_mut_ptr(),
                    shared as *mut i32,
                    slots,
                    Par::SEQ,
                )
            }
        });
        let g = (m * n * k) as f64 / secs / 1e9;
        let pct = if peak > 0.0 { 100.0 * g / peak } else { 0.0 };
        println!("{m:>6} {n:>6} {k:>6} {g:>10.1} {pct:>5.0}%");
    }
}

/// `ONNXC_QGEMM=1`, second table: integer convolutions with uint8 outputs (the epilogue's
/// requantization) at the shapes of the quantized CNNs' cheap, output-bound layers.
pub(crate) fn qconv_table() {
    use onnxc_runtime::conv::ConvGeometry;
    use onnxc_runtime::par::Par;
    use onnxc_runtime::qconv::{QConvParams, QOut, QScalars, qconv};
    println!(
        "{:>5} {:>5} {:>5} {:>3} {:>3} {:>10} {:>9}",
        "C", "M", "HW", "k", "s", "GMAC/s", "ns/out"
    );
    for (c, m, hw, k, s) in [
        (32, 64, 112, 1, 1),
        (64, 128, 56, 1, 1),
        (256, 256, 14, 1, 1),
        (16, 64, 55, 1, 1),
        (16, 64, 55, 3, 1),
        (3, 64, 224, 3, 2),
    ] {
        let pad = k / 2;
        let out = (hw + 2 * pad - k) / s + 1;
        let geo = ConvGeometry {
            n: 1,
            c,
            m,
            group: 1,
            input: [hw, hw].as_slice().into(),
            kernel: [k, k].as_slice().into(),
            output: [out, out].as_slice().into(),
            strides: [s, s].as_slice().into(),
            dilations: [1, 1].as_slice().into(),
            pads: [pad, pad].as_slice().into(),
            wide_simd: true,
            no_winograd: false,
            input_planes: Vec::new().into(),
            path: Default::default(),
        };
        let q = QScalars {
            out: QOut::U8,
            x_signed: false,
            x_zp: 128,
            y_zp: 128,
            lo: 0,
            hi: 255,
        };
        let (mu, kk) = (m as usize, (c * k * k) as usize);
        let w: Vec<i8> = (0..mu * kk).map(|i| ((i * 7919) % 255) as i8).collect();
        let scale: Vec<f32> = (0..mu).map(|i| 1.0e-4 * (1.0 + i as f32 / 97.0)).collect();
        let blob = QConvParams::encode(&geo, q, &w, &vec![0; mu], None, &scale, &vec![0.0; mu]);
        let p = QConvParams::decode(&blob).expect("valid");
        let x: Vec<u8> = (0..(c * hw * hw) as usize)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        let outs = mu * (out * out) as usize;
        let mut y = vec![0u8; outs];
        let need = p.scratch();
        let mut scratch = Buf::zeros(need.single() / 4 + 16);
        let (_, slots) = need.layout(scratch.as_mut_ptr());
        let macs = outs * kk;
        let reps = (1e8 / macs as f64).ceil() as usize;
        let secs = best_per_call(10, reps, |_| {
            // SAFETY: x, y and the scratch hold what the blob describes.
            unsafe { qconv(&p, x.as_ptr(), y.as_mut_ptr(), slots, Par::SEQ) }
        });
        black_box(y[0]);
        println!(
            "{c:>5} {m:>5} {hw:>5} {k:>3} {s:>3} {:>10.1} {:>9.3}",
            macs as f64 / secs / 1e9,
            secs * 1e9 / outs as f64
        );
    }
}
