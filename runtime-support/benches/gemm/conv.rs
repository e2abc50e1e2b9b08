//! Convolution sections: conv-shaped products through the GEMM path, and whole layers
//! (`ONNXC_CONV_FILTER`, `ONNXC_CONV_COLD`, `ONNXC_CONV_COLD_INPUT`, `ONNXC_CONV_RESIDUAL`).

use super::*;

/// Convolution-shaped products (M = out channels, N = output pixels, K = C·kh·kw) from
/// ResNet-50 and SqueezeNet, through the GEMM path convolutions take (packed A, B row-major:
/// packed per block, or read in place where `read_b_in_place` decides so).
pub(crate) fn conv_shapes(peak: f64) {
    println!(
        "{:>6} {:>6} {:>6} {:>10} {:>6}",
        "M", "N", "K", "GFLOP/s", "%peak"
    );
    for &(m, n, k) in &[
        (64usize, 12544usize, 147usize),
        (64, 3136, 576),
        (128, 784, 1152),
        (256, 196, 2304),
        (512, 49, 4608),
        // Pointwise (1×1) convolutions: B is the activation matrix itself.
        (64, 3136, 64),
        (256, 3136, 64),
        (64, 3136, 256),
        (16, 3025, 64),
        (64, 3025, 16),
        (128, 784, 512),
        (1024, 196, 256),
        (2048, 49, 512),
        // A power-of-two row stride (64×64 image): in-place B reads would collide in L1.
        (64, 4096, 256),
        (192, 196, 1728),
        (196, 192, 1728),
        (224, 49, 2016),
        (49, 224, 2016),
        (512, 49, 4608),
        (49, 512, 4608),
        (512, 64, 4608),
        (512, 48, 4608),
        (512, 32, 4608),
    ] {
        conv_shape(m, n, k, peak, false);
        if m < 100 {
            // The transposed orientation of a small-N conv: weights as a packed B.
            conv_shape(m, n, k, peak, true);
        }
    }
}

pub(crate) fn conv_shape(m: usize, n: usize, k: usize, peak: f64, b_packed: bool) {
    {
        let (_, b, ap, bp, mut cbuf, mut scratch) = operands(m, n, k);
        let reps = (1 << 28) / (m * n * k) + 1;
        let best = best_per_call(5, reps, |_| {
            packed_a_gemm((m, n, k), &ap, (&b, &bp, b_packed), &mut cbuf, &mut scratch)
        });
        let g = gflops(m, n, k, best);
        let tag = if b_packed { "  (B prepacked)" } else { "" };
        println!(
            "{m:>6} {n:>6} {k:>6} {g:>10.1} {:>5.0}%{tag}",
            100.0 * g / peak
        );
    }
}

/// Whole convolution layers through `conv_f32` (packing, im2col, epilogue included), with
/// the weights packed as the compiler packs them. `ONNXC_CONV_FILTER=cin,cout,hw[,k]` picks
/// layers.
/// (cin, cout, input hw, kernel, stride) of the light models' conv layers.
pub(crate) const LAYERS: &[(i64, i64, i64, i64, i64)] = &[
    (3, 64, 224, 7, 2),
    (64, 64, 56, 3, 1),
    (128, 128, 28, 3, 1),
    (256, 256, 14, 3, 1),
    (512, 512, 7, 3, 1),
    (256, 1024, 14, 1, 1),
    (1024, 256, 14, 1, 1),
    (512, 2048, 7, 1, 1),
    (2048, 512, 7, 1, 1),
    // SqueezeNet's 3×3 expands, DenseNet's 3×3 growth convs (32 output channels).
    (16, 64, 55, 3, 1),
    (32, 128, 27, 3, 1),
    (48, 192, 13, 3, 1),
    (64, 256, 13, 3, 1),
    (64, 192, 56, 3, 1),
    (64, 96, 28, 3, 1),
    (96, 96, 28, 3, 1),
    (128, 32, 56, 3, 1),
    (128, 32, 28, 3, 1),
    (128, 32, 14, 3, 1),
    (128, 32, 7, 3, 1),
    // SqueezeNet's 1×1 expands: K of 16–64, output-bound.
    (16, 64, 55, 1, 1),
    (32, 128, 27, 1, 1),
    // SqueezeNet's classifier (ldb 169: rows not 64-byte aligned).
    (512, 1000, 13, 1, 1),
    // Strided: SqueezeNet/MobileNet stems, ResNet-50 v1's 1×1 stride-2 downsampling.
    (3, 64, 224, 3, 2),
    (3, 32, 224, 3, 2),
    // Other stems: SqueezeNet 1.0/ZFNet's 7×7/2 to 96, VGG's 3×3/1, AlexNet's 11×11/4,
    // ShuffleNet's 3×3/2 to 24.
    (3, 96, 224, 7, 2),
    (3, 64, 224, 3, 1),
    (3, 64, 224, 11, 4),
    (3, 24, 224, 3, 2),
    (1024, 512, 14, 1, 2),
    (1024, 2048, 14, 1, 2),
    (512, 1024, 28, 1, 2),
    (256, 512, 56, 1, 2),
    // Small networks' layers (the C example's tiny_cnn: 32×32 images; CIFAR- and
    // MNIST-sized nets).
    (3, 16, 32, 3, 1),
    (16, 32, 16, 3, 2),
    (32, 32, 16, 3, 1),
    (32, 64, 16, 3, 2),
    (64, 64, 8, 3, 1),
    (64, 128, 8, 3, 2),
    (128, 128, 4, 3, 1),
    (8, 16, 28, 5, 1),
    (16, 32, 14, 5, 1),
    // ResNet-50 v1.5's strided 3×3 convs.
    (128, 128, 56, 3, 2),
    (256, 256, 28, 3, 2),
    (512, 512, 14, 3, 2),
    (512, 256, 28, 1, 2),
    (64, 256, 56, 1, 1),
    (256, 64, 56, 1, 1),
    // DenseNet-121's bottleneck 1×1 convs (128 output channels, K growing by 32).
    (256, 128, 56, 1, 1),
    (512, 128, 28, 1, 1),
    (1024, 128, 14, 1, 1),
    (992, 128, 7, 1, 1),
    // Text detectors' (DBNet-style) 3×3 stride-1 convs at stride-4 maps of 320×320 and
    // 640×640 images, few channels.
    (32, 32, 80, 3, 1),
    (32, 64, 80, 3, 1),
    (64, 64, 80, 3, 1),
    (32, 32, 160, 3, 1),
    (64, 16, 160, 3, 1),
    // YOLO-style downsampling: 3×3 stride-2 convs doubling the channels.
    (32, 64, 160, 3, 2),
    (64, 128, 80, 3, 2),
    (128, 256, 40, 3, 2),
    // MobileNet's pointwise convs (between the depthwise ones).
    (32, 64, 112, 1, 1),
    (64, 128, 56, 1, 1),
    (128, 128, 56, 1, 1),
    (128, 256, 28, 1, 1),
    (256, 256, 28, 1, 1),
    (256, 512, 14, 1, 1),
    (512, 512, 14, 1, 1),
    (512, 1024, 7, 1, 1),
];

/// Grouped layers `(cin, cout, hw, k, stride, group)`: ShuffleNet's 4-group pointwise convs
/// (34/68/136 channels per group), which are most of its time.
pub(crate) const GROUPED_LAYERS: &[(i64, i64, i64, i64, i64, i64)] = &[
    (136, 136, 28, 1, 1, 4),
    (272, 272, 14, 1, 1, 4),
    (544, 544, 7, 1, 1, 4),
    (24, 112, 56, 1, 1, 4),
    // Depthwise: MobileNet/EfficientNet's stride-2 layer over 112×112, stride 1 at 56×56.
    (96, 96, 112, 3, 2, 96),
    (144, 144, 56, 3, 1, 144),
    (144, 144, 56, 5, 2, 144),
    // ConvNeXt's 7×7 depthwise.
    (96, 96, 56, 7, 1, 96),
];

/// A square 2-D convolution of one image as the light models have them: `k`×`k` kernel at
/// stride `st`, padding `k / 2` on every side.
pub(crate) fn square_conv(
    c: i64,
    m: i64,
    hw: i64,
    k: i64,
    st: i64,
    group: i64,
) -> onnxc_runtime::conv::ConvGeometry<'static> {
    let pad = k / 2;
    let o = (hw + 2 * pad - k) / st + 1;
    onnxc_runtime::conv::ConvGeometry {
        n: 1,
        c,
        m,
        group,
        input: [hw, hw].into(),
        kernel: [k, k].into(),
        output: [o, o].into(),
        strides: [st, st].into(),
        dilations: [1, 1].into(),
        pads: [pad, pad].into(),
        wide_simd: onnxc_runtime::isa::wide_simd(),
        no_winograd: false,
        input_planes: Default::default(),
        path: Default::default(),
    }
}

/// Whether `ONNXC_CONV_FILTER` (`filter`: unset, `all`, `cin,cout,hw` or `cin,cout,hw,k`)
/// picks the layer.
pub(crate) fn selected(filter: &Option<String>, c: i64, m: i64, hw: i64, k: i64) -> bool {
    filter.as_ref().is_none_or(|f| {
        f == "all" || *f == format!("{c},{m},{hw}") || *f == format!("{c},{m},{hw},{k}")
    })
}

pub(crate) fn conv_layers(peak: f64) {
    use onnxc_runtime::conv::conv_f32;
    println!(
        "{:>5} {:>5} {:>4} {:>3} {:>3} {:>10} {:>6}  path",
        "cin", "cout", "hw", "k", "s", "GFLOP/s", "%peak"
    );
    let filter = std::env::var("ONNXC_CONV_FILTER").ok();
    let all = LAYERS
        .iter()
        .map(|&(c, m, hw, k, st)| (c, m, hw, k, st, 1))
        .chain(GROUPED_LAYERS.iter().copied());
    for (c, m, hw, k, st, group) in all {
        if !selected(&filter, c, m, hw, k) {
            continue;
        }
        let g = square_conv(c, m, hw, k, st, group);
        let o = g.output[0];
        // ONNXC_CONV_COLD_INPUT: rotate through copies of the input (and residual) spanning
        // 24 MB, so every call reads them from L3 as a layer does after its producer's
        // output left L2.
        let xcopies = if std::env::var_os("ONNXC_CONV_COLD_INPUT").is_some() {
            (24usize << 20) / ((c * hw * hw) as usize * 4) + 1
        } else {
            1
        };
        let xs: Vec<_> = (0..xcopies).map(|_| data((c * hw * hw) as usize)).collect();
        let w = data((m * c / group * k * k) as usize);
        let wp = g.pack_weights(&w);
        // ONNXC_CONV_COLD: rotate through copies of the packed weights spanning 128 MB, so
        // every call streams them from DRAM as a model larger than L3 does.
        let copies = if std::env::var_os("ONNXC_CONV_COLD").is_some() {
            (128 << 20) / (wp.len() * 4) + 1
        } else {
            1
        };
        // 64-byte aligned, as the compiler emits weights (a Vec's 16-byte alignment splits
        // every 64-byte load of weights read as B panels, the pixel-major path's).
        let wps: Vec<Buf> = (0..copies)
            .map(|_| {
                let mut b = Buf::zeros(wp.len());
                b.copy_from_slice(&wp);
                b
            })
            .collect();
        let bias = data(m as usize);
        let mut y = Buf::zeros((m * o * o) as usize);
        // ONNXC_CONV_RESIDUAL: a residual input in the epilogue, as ResNet's block ends have.
        let residuals: Vec<_> = match std::env::var_os("ONNXC_CONV_RESIDUAL") {
            Some(_) => (0..xcopies).map(|_| data((m * o * o) as usize)).collect(),
            None => Vec::new(),
        };
        let mut scratch = Buf::zeros(g.scratch_floats(true));
        let flops = 2.0 * (m * o * o * c / group * k * k) as f64;
        let reps = (4e8 / flops) as usize + 1;
        let best = best_per_call(5, reps, |rep| {
            // SAFETY: x, the packed weights, bias and y are sized from the geometry; scratch holds
            // g.scratch_floats(true).
            unsafe {
                conv_f32(
                    onnxc_runtime::par::Par::SEQ,
                    &g,
                    xs[rep % xcopies].as_ptr(),
                    wps[rep % copies].as_ptr(),
                    true,
                    bias.as_ptr(),
                    residuals
                        .get(rep % xcopies)
                        .map_or(std::ptr::null(), |r| r.as_ptr()),
                    0.0,
                    f32::INFINITY,
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            };
            black_box(y[0]);
        });
        let gf = flops / best / 1e9;
        let path = if g.use_winograd() {
            "winograd"
        } else if g.pixel_major() {
            "pixel-major"
        } else if g.uses_indirect() {
            "indirect"
        } else {
            "channel-major"
        };
        let grouped = if group > 1 {
            format!(" (group {group})")
        } else {
            String::new()
        };
        println!(
            "{c:>5} {m:>5} {hw:>4} {k:>3} {st:>3} {gf:>10.1} {:>5.0}%  {path}{grouped}",
            100.0 * gf / peak
        );
    }
}
