//! `ONNXC_NCHWC`: channel-blocked convolution layers.

use super::*;

/// `ONNXC_NCHWC=1`: each layer of `LAYERS` with channel counts divisible by 8 through
/// `conv_f32` (NCHW) and through the blocked convolution (NCHWc), interleaved, best of 7
/// rounds each (`ONNXC_CONV_FILTER` picks layers as above; `ONNXC_NCHWC_LAYERS=c,m,hw,k,s,
/// group[;…]` runs those instead). The blocked layout's input conversion is not counted: in
/// a model the layout is kept between layers.
pub(crate) fn nchwc_layers() {
    let filter = std::env::var("ONNXC_CONV_FILTER").ok();
    println!(
        "{:>5} {:>5} {:>4} {:>3} {:>3} {:>5} {:>10} {:>10}",
        "cin", "cout", "hw", "k", "s", "group", "NCHW GF/s", "NCHWc GF/s"
    );
    if let Ok(list) = std::env::var("ONNXC_NCHWC_LAYERS") {
        for layer in list.split(';') {
            let v: Vec<i64> = layer
                .split(',')
                .map(|x| x.trim().parse().unwrap())
                .collect();
            let [c, m, hw, k, st, group] = v[..] else {
                panic!("ONNXC_NCHWC_LAYERS: want c,m,hw,k,s,group, got {layer}");
            };
            nchwc_layer(c, m, hw, k, st, group);
        }
        return;
    }
    // MobileNet's depthwise layers and ShuffleNet's grouped pointwise ones after LAYERS.
    let extra: &[(i64, i64, i64, i64, i64, i64)] = &[
        (32, 32, 112, 3, 1, 32),
        (64, 64, 112, 3, 2, 64),
        (128, 128, 56, 3, 1, 128),
        (256, 256, 28, 3, 1, 256),
        (512, 512, 14, 3, 1, 512),
        (512, 512, 14, 3, 2, 512),
        (1024, 1024, 7, 3, 1, 1024),
        (240, 240, 28, 1, 1, 3),
        (480, 480, 14, 1, 1, 3),
    ];
    let all = LAYERS
        .iter()
        .map(|&(c, m, hw, k, st)| (c, m, hw, k, st, 1))
        .chain(extra.iter().copied());
    for (c, m, hw, k, st, group) in all {
        if selected(&filter, c, m, hw, k) {
            nchwc_layer(c, m, hw, k, st, group);
        }
    }
}

pub(crate) fn nchwc_layer(c: i64, m: i64, hw: i64, k: i64, st: i64, group: i64) {
    use onnxc_runtime::conv::conv_f32;
    use onnxc_runtime::nchwc::{BlockedConv, Epilogue as BlockedEpilogue, conv as conv_blocked};
    let g = square_conv(c, m, hw, k, st, group);
    let (o, pad) = (g.output[0], g.pads[0]);
    let u = |v: i64| v as usize;
    let bg = BlockedConv {
        n: 1,
        c: u(c),
        m: u(m),
        group: u(group),
        input: [u(hw), u(hw)],
        output: [u(o), u(o)],
        kernel: [u(k), u(k)],
        strides: [u(st), u(st)],
        dilations: [1, 1],
        pads: [u(pad), u(pad)],
        plain_input: c % 8 != 0,
        pad_planes: true,
    };
    if !bg.supported() {
        return;
    }
    let x = data((c * hw * hw) as usize);
    let w = data((m * c / group * k * k) as usize);
    let wp = g.pack_weights(&w);
    let mut wpb = Buf::zeros(bg.packed_weights_len());
    wpb.copy_from_slice(&bg.pack_weights(&w));
    let mut wpa = Buf::zeros(wp.len());
    wpa.copy_from_slice(&wp);
    let bias = data(m as usize);
    let mut y = Buf::zeros((m * o * o) as usize);
    let mut scratch = Buf::zeros(g.scratch_floats(true).max(bg.scratch_floats()));
    let flops = 2.0 * (m * o * o * c / group * k * k) as f64;
    let reps = (2e8 / flops) as usize + 1;
    let (mut best_a, mut best_b) = (f64::MAX, f64::MAX);
    let ep = BlockedEpilogue {
        bias: bias.as_ptr(),
        residual: std::ptr::null(),
        lo: 0.0,
        hi: f32::INFINITY,
    };
    for _ in 0..7 {
        best_a = best_a.min(best_per_call(1, reps, |_| {
            // SAFETY: x, the packed weights, bias and y are sized from the geometry; scratch holds
            // g.scratch_floats(true).
            unsafe {
                conv_f32(
                    onnxc_runtime::par::Par::SEQ,
                    &g,
                    x.as_ptr(),
                    wpa.as_ptr(),
                    true,
                    bias.as_ptr(),
                    std::ptr::null(),
                    0.0,
                    f32::INFINITY,
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            };
            black_box(y[0]);
        }));
        best_b = best_b.min(best_per_call(1, reps, |_| {
            // SAFETY: the blocked buffers are sized from bg, as conv_blocked requires.
            unsafe {
                conv_blocked(
                    onnxc_runtime::par::Par::SEQ,
                    &bg,
                    x.as_ptr(),
                    wpb.as_ptr(),
                    &ep,
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            };
            black_box(y[0]);
        }));
    }
    println!(
        "{c:>5} {m:>5} {hw:>4} {k:>3} {st:>3} {group:>5} {:>10.1} {:>10.1}",
        flops / best_a / 1e9,
        flops / best_b / 1e9
    );
}
