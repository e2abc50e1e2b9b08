//! `ONNXC_POOL`: pooling layers.

use super::*;

/// Pooling layers of the light models through `pool2d_f32` (plain NCHW) and through the
/// blocked NCHWc kernel on the same shapes (`ONNXC_POOL=1`; with `ONNXC_POOL=cold` the
/// input rotates through copies spanning 128 MB, as a pool reading a conv output larger
/// than L2 does in a model). GB/s counts input and output bytes once.
pub(crate) fn pool_layers() {
    use onnxc_runtime::pool::{PoolGeometry, pool2d_f32};
    let cold = std::env::var("ONNXC_POOL").as_deref() == Ok("cold");
    println!(
        "{:>5} {:>4} {:>2} {:>2} {:>4} {:>9} {:>7} {:>10} {:>7}",
        "c", "hw", "k", "s", "kind", "plain us", "GB/s", "blocked us", "GB/s"
    );
    // (channels, input hw, kernel, stride, pad, kind 0 max / 1 average)
    for &(c, hw, k, st, pad, kind) in &[
        (64i64, 111i64, 3i64, 2i64, 0i64, 0i64), // SqueezeNet
        (128, 55, 3, 2, 0, 0),
        (256, 27, 3, 2, 0, 0),
        (64, 112, 3, 2, 1, 0), // ResNet-50, DenseNet-121
        (24, 112, 3, 2, 1, 0), // ShuffleNet: max, then average pools
        (136, 28, 3, 2, 1, 1),
        (192, 55, 3, 2, 0, 0), // Inception v1
        (512, 13, 3, 1, 1, 0),
        (480, 28, 3, 1, 1, 0),
        (128, 56, 2, 2, 0, 1), // DenseNet-121's transition average pools
        (192, 28, 3, 1, 1, 1), // Inception v2's average pools
        (576, 14, 3, 1, 1, 1),
    ] {
        let o = (hw + 2 * pad - k) / st + 1;
        let g = PoolGeometry {
            kind,
            count_include_pad: false,
            p: 2,
            planes: c,
            input: [hw, hw],
            output: [o, o],
            kernel: [k, k],
            strides: [st, st],
            dilations: [1, 1],
            pads_begin: [pad, pad],
            pads_end: [pad, pad],
        };
        let isz = (c * hw * hw) as usize;
        let copies = if cold { (128 << 20) / (isz * 4) + 1 } else { 1 };
        let xs: Vec<Buf> = (0..copies).map(|_| data(isz)).collect();
        let mut y = Buf::zeros((c * o * o) as usize);
        let mut scratch = Buf::zeros(g.scratch_floats());
        let reps = 200;
        let best = best_per_call(5, reps, |rep| {
            // SAFETY: each x copy holds c·hw·hw floats, y c·o·o; scratch holds g.scratch_floats().
            unsafe {
                pool2d_f32(
                    onnxc_runtime::par::Par::SEQ,
                    &g,
                    xs[rep % copies].as_ptr(),
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            };
            black_box(y[0]);
        });
        let blocked_g = PoolGeometry {
            planes: c / onnxc_runtime::nchwc::CB as i64,
            ..g.clone()
        };
        let blocked = best_per_call(5, reps, |rep| {
            // SAFETY: c is a multiple of CB, so the plain buffers hold blocked_g's planes × CB.
            unsafe {
                onnxc_runtime::nchwc::pool::pool(
                    &blocked_g,
                    xs[rep % copies].as_ptr(),
                    y.as_mut_ptr(),
                )
            };
            black_box(y[0]);
        });
        let bytes = 4.0 * (isz as f64 + (c * o * o) as f64);
        println!(
            "{c:>5} {hw:>4} {k:>2} {st:>2} {:>4} {:>9.1} {:>7.1} {:>10.1} {:>7.1}",
            if kind == 0 { "max" } else { "avg" },
            best * 1e6,
            bytes / best / 1e9,
            blocked * 1e6,
            bytes / blocked / 1e9
        );
    }
}
