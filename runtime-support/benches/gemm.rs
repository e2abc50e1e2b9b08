//! GEMM throughput at 64³ … 1024³ (single thread): packed-A GEMM with B packed per call (the
//! general path) and with B packed ahead of time (weights). Prints GFLOP/s and the fraction
//! of this core's peak, measured first with a register-only FMA loop at the widest vector
//! width the CPU has (override with `ONNXC_PEAK_GFLOPS`).
//!
//! `cargo bench -p onnxc-runtime --bench gemm` (`ONNXC_GEMM_TABLE=1`: the quick GEMM table
//! only; `ONNXC_QGEMM=1`: the integer product against the measured VNNI peak, and integer convolutions with uint8 outputs, only; `ONNXC_CONV_FILTER=cin,cout,hw[,k]`: chosen conv layers only, `all`: every listed layer;
//! with `ONNXC_CONV_COLD=1` the weights, with `ONNXC_CONV_COLD_INPUT=1` the input and residual
//! come from beyond L2 as in a model; `ONNXC_CONV_RESIDUAL=1` adds a residual epilogue).

use criterion::{Criterion, Throughput, black_box};
use onnxc_runtime::gemm::{self, BSource, Epilogue, MR, pack};
use std::time::Instant;

/// A 64-byte-aligned float buffer, as the compiled model's workspace and constants are
/// (a plain `Vec<f32>` is only 16-byte aligned, so every 64-byte load would split a line).
struct Buf {
    lines: Vec<Line>,
    len: usize,
}

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([f32; 16]);

impl Buf {
    fn zeros(len: usize) -> Buf {
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

fn data(n: usize) -> Buf {
    let mut b = Buf::zeros(n);
    for (i, v) in b.iter_mut().enumerate() {
        *v = ((i * 7919) % 1000) as f32 / 1000.0 - 0.5;
    }
    b
}

fn gflops(m: usize, n: usize, k: usize, secs: f64) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64 / secs / 1e9
}

/// Seconds per call of `f(rep)`: the best of `rounds` batches of `reps` calls (a slow spell
/// of the machine slows a batch and never speeds one up).
fn best_per_call(rounds: usize, reps: usize, mut f: impl FnMut(usize)) -> f64 {
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

/// Convolution-shaped products (M = out channels, N = output pixels, K = C·kh·kw) from
/// ResNet-50 and SqueezeNet, through the GEMM path convolutions take (packed A, B row-major:
/// packed per block, or read in place where `read_b_in_place` decides so).
fn conv_shapes(peak: f64) {
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

/// The operands of an m × n × k product: `(a, b, a packed, b packed, c, scratch)`, A and B
/// row-major test data, C zero, the scratch `gemm_packed_a` needs with B read in place.
fn operands(m: usize, n: usize, k: usize) -> (Buf, Buf, Buf, Buf, Buf, Buf) {
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
fn packed_a_gemm(
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

fn conv_shape(m: usize, n: usize, k: usize, peak: f64, b_packed: bool) {
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
const LAYERS: &[(i64, i64, i64, i64, i64)] = &[
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
const GROUPED_LAYERS: &[(i64, i64, i64, i64, i64, i64)] = &[
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
fn square_conv(
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
fn selected(filter: &Option<String>, c: i64, m: i64, hw: i64, k: i64) -> bool {
    filter.as_ref().is_none_or(|f| {
        f == "all" || *f == format!("{c},{m},{hw}") || *f == format!("{c},{m},{hw},{k}")
    })
}

fn conv_layers(peak: f64) {
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

/// `ONNXC_NCHWC=1`: each layer of `LAYERS` with channel counts divisible by 8 through
/// `conv_f32` (NCHW) and through the blocked convolution (NCHWc), interleaved, best of 7
/// rounds each (`ONNXC_CONV_FILTER` picks layers as above). The blocked layout's input
/// conversion is not counted: in a model the layout is kept between layers.
fn nchwc_layers() {
    let filter = std::env::var("ONNXC_CONV_FILTER").ok();
    println!(
        "{:>5} {:>5} {:>4} {:>3} {:>3} {:>5} {:>10} {:>10}",
        "cin", "cout", "hw", "k", "s", "group", "NCHW GF/s", "NCHWc GF/s"
    );
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

fn nchwc_layer(c: i64, m: i64, hw: i64, k: i64, st: i64, group: i64) {
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

/// Pooling layers of the light models through `pool2d_f32` (plain NCHW) and through the
/// blocked NCHWc kernel on the same shapes (`ONNXC_POOL=1`; with `ONNXC_POOL=cold` the
/// input rotates through copies spanning 128 MB, as a pool reading a conv output larger
/// than L2 does in a model). GB/s counts input and output bytes once.
fn pool_layers() {
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

/// Runs `n` steps of an FMA loop at the widest vector the CPU has (12 independent
/// accumulator chains, no memory traffic) and returns the floating-point operations done
/// (0 without FMA).
fn fma_loop(n: usize) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // Twelve named accumulators so they live in registers (an array may not).
        macro_rules! chains {
            ($set:ident, $fma:ident, $n:expr) => {{
                let (a, b) = ($set(0.999_999), $set(1e-7));
                let (mut v0, mut v1, mut v2, mut v3, mut v4, mut v5) = (
                    $set(0.0),
                    $set(0.1),
                    $set(0.2),
                    $set(0.3),
                    $set(0.4),
                    $set(0.5),
                );
                let (mut v6, mut v7, mut v8, mut v9, mut v10, mut v11) = (
                    $set(0.6),
                    $set(0.7),
                    $set(0.8),
                    $set(0.9),
                    $set(1.0),
                    $set(1.1),
                );
                for _ in 0..$n {
                    v0 = $fma(v0, a, b);
                    v1 = $fma(v1, a, b);
                    v2 = $fma(v2, a, b);
                    v3 = $fma(v3, a, b);
                    v4 = $fma(v4, a, b);
                    v5 = $fma(v5, a, b);
                    v6 = $fma(v6, a, b);
                    v7 = $fma(v7, a, b);
                    v8 = $fma(v8, a, b);
                    v9 = $fma(v9, a, b);
                    v10 = $fma(v10, a, b);
                    v11 = $fma(v11, a, b);
                }
                black_box((v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11));
            }};
        }
        #[target_feature(enable = "avx512f")]
        unsafe fn fma512(n: usize) {
            chains!(_mm512_set1_ps, _mm512_fmadd_ps, n)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn fma256(n: usize) {
            chains!(_mm256_set1_ps, _mm256_fmadd_ps, n)
        }
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above.
            unsafe { fma512(n) };
            n as f64 * 12.0 * 16.0 * 2.0
        } else if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: AVX2 and FMA were detected just above.
            unsafe { fma256(n) };
            n as f64 * 12.0 * 8.0 * 2.0
        } else {
            0.0
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = n;
        0.0
    }
}

/// Steps of one `fma_loop` run: about 8 ms.
const PEAK_STEPS: usize = 4_000_000;

/// Peak FMA throughput of one core (GFLOP/s): best of 15 runs (this VM's slow spells last
/// longer than a run).
fn measured_peak() -> f64 {
    peak_runs(1).into_iter().fold(0.0, f64::max)
}

/// 15 runs of the FMA loop on `threads` threads at once, each the GFLOP/s of them all: what
/// a compute-bound kernel split over that many workers can reach on this machine. On a VM,
/// two vCPUs may share a physical core's FMA units or a neighbour's load.
fn peak_runs(threads: usize) -> Vec<f64> {
    (0..15)
        .map(|_| {
            // Each thread times itself from the common start (a timing thread of its own
            // would compete with them for the cores).
            let start = std::sync::Barrier::new(threads);
            let runs: Vec<(f64, f64)> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            let t = Instant::now();
                            let flops = fma_loop(PEAK_STEPS);
                            (flops, t.elapsed().as_secs_f64())
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().unwrap_or((0.0, 1.0)))
                    .collect()
            });
            let flops: f64 = runs.iter().map(|r| r.0).sum();
            flops / runs.iter().map(|r| r.1).fold(0.0, f64::max) / 1e9
        })
        .collect()
}

/// The median of `v`.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Best read bandwidth (GB/s) of one core summing a buffer of `bytes` over and over: the
/// buffer's level of the cache hierarchy (L2, L3 or DRAM) bounds any kernel that streams
/// that many bytes per call.
fn read_bandwidth(bytes: usize) -> f64 {
    let buf = Buf::zeros(bytes / 4);
    let n = buf.len() / 128 * 128;
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn sum(x: &[f32]) -> f32 {
        use std::arch::x86_64::*;
        let mut acc = [_mm256_setzero_ps(); 8];
        for chunk in x.chunks_exact(64) {
            for (u, a) in acc.iter_mut().enumerate() {
                // SAFETY: AVX2 is enabled here; chunk holds 64 floats and u·8 + 8 ≤ 64.
                *a = _mm256_add_ps(*a, unsafe { _mm256_loadu_ps(chunk.as_ptr().add(u * 8)) });
            }
        }
        let mut t = [0f32; 8];
        let s = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, a| _mm256_add_ps(s, *a));
        // SAFETY: AVX2 is enabled here; t holds 8 floats.
        unsafe { _mm256_storeu_ps(t.as_mut_ptr(), s) };
        t.iter().sum()
    }
    #[cfg(not(target_arch = "x86_64"))]
    fn sum(x: &[f32]) -> f32 {
        x.iter().sum()
    }
    let mut best = f64::MAX;
    let reps = (2e9 / bytes as f64).clamp(3.0, 300.0) as usize;
    for _ in 0..reps {
        let t = Instant::now();
        #[cfg(target_arch = "x86_64")]
        let r = if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected just above.
            unsafe { sum(&buf[..n]) }
        } else {
            buf[..n].iter().sum()
        };
        #[cfg(not(target_arch = "x86_64"))]
        let r = sum(&buf[..n]);
        black_box(r);
        best = best.min(t.elapsed().as_secs_f64());
    }
    (n * 4) as f64 / best / 1e9
}

/// Peak uint8 × int8 multiply-accumulates of one core (GMAC/s): 12 independent `vpdpbusd`
/// chains (64 per instruction), no memory traffic; 0 without AVX-512 VNNI.
fn measured_int8_peak() -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        unsafe fn chains(n: usize) {
            let (a, b) = (_mm512_set1_epi8(3), _mm512_set1_epi8(-2));
            let mut v = [_mm512_setzero_si512(); 12];
            for _ in 0..n {
                for x in v.iter_mut() {
                    *x = _mm512_dpbusd_epi32(*x, a, b);
                }
            }
            black_box(v);
        }
        if !std::is_x86_feature_detected!("avx512vnni")
            || !std::is_x86_feature_detected!("avx512bw")
        {
            return 0.0;
        }
        let n = 2_000_000;
        let mut best = 0f64;
        for _ in 0..15 {
            let t = Instant::now();
            // SAFETY: AVX-512 F, BW and VNNI were detected above.
            unsafe { chains(n) };
            best = best.max(n as f64 * 12.0 * 64.0 / t.elapsed().as_secs_f64() / 1e9);
        }
        best
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0.0
    }
}

/// `ONNXC_QGEMM=1`: the integer matrix product (`onnxc_qmatmul`'s kernel, int32 output) at
/// 512×512×512 and a few model shapes, single thread, against the measured VNNI peak.
fn qgemm_table() {
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
        let blob = QMatMulParams::encode(
            q,
            1,
            m,
            k,
            n,
            &w,
            &vec![0; n],
            None,
            &vec![1.0; n],
            &vec![0.0; n],
        );
        let p = QMatMulParams::decode(&blob).expect("valid");
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
fn qconv_table() {
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

fn main() {
    if std::env::var_os("ONNXC_QGEMM").is_some() {
        qgemm_table();
        qconv_table();
        return;
    }
    let peak: f64 = std::env::var("ONNXC_PEAK_GFLOPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(measured_peak);
    println!("measured single-core peak: {peak:.1} GFLOP/s");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores > 1 {
        // Alternating, so that both see the same spells of the machine.
        let (mut one, mut all) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            one.extend(peak_runs(1));
            all.extend(peak_runs(cores));
        }
        let (one, all) = (median(one), median(all));
        println!(
            "measured peak of {cores} threads at once (median run): {all:.1} GFLOP/s, {:.2}x one core's {one:.1}",
            all / one
        );
    }
    // What a memory-bound model (batch-1 MLP layers stream their weights) can reach.
    let bw: Vec<String> = [1.0f64, 3.2, 8.0, 64.0]
        .iter()
        .map(|&mb| {
            format!(
                "{mb} MB {:.0} GB/s",
                read_bandwidth((mb * 1048576.0) as usize)
            )
        })
        .collect();
    println!(
        "measured read bandwidth (one core, repeated reads): {}",
        bw.join(", ")
    );
    // The micro-kernel alone, panels in L1: the ceiling for everything below.
    {
        let kc: usize = std::env::var("KCB")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(gemm::KC);
        let a = data(12 * kc);
        let b = data(32 * kc);
        let mut cb = Buf::zeros(12 * 32);
        // Best of 20 runs of 20 000 tiles.
        let n = 20_000;
        let mut tile = (0, 0);
        let mut secs = f64::MAX;
        for _ in 0..20 {
            let t = Instant::now();
            for _ in 0..n {
                // SAFETY: a holds 12·kc floats, b 32·kc, cb 12 rows of 32.
                tile = unsafe {
                    gemm::microkernel_only(kc, a.as_ptr(), b.as_ptr(), cb.as_mut_ptr(), 32)
                };
            }
            secs = secs.min(t.elapsed().as_secs_f64());
        }
        black_box(cb[0]);
        if tile.0 > 0 {
            let g = gflops(tile.0 * n, tile.1, kc, secs);
            println!(
                "micro-kernel {}x{} (L1): {g:.1} GFLOP/s ({:.0}% of peak)",
                tile.0,
                tile.1,
                100.0 * g / peak
            );
        }
    }
    if std::env::var("ONNXC_EXP").as_deref() == Ok("pm") {
        orientation_experiment(peak);
        return;
    }
    if std::env::var_os("ONNXC_EXP").is_some() {
        experiment();
        return;
    }
    if std::env::var_os("ONNXC_NCHWC").is_some() {
        nchwc_layers();
        return;
    }
    if std::env::var_os("ONNXC_CONV_FILTER").is_some() {
        conv_layers(peak);
        return;
    }
    if std::env::var_os("ONNXC_POOL").is_some() {
        pool_layers();
        return;
    }
    if let Ok(shapes) = std::env::var("ONNXC_ATTENTION") {
        attention_shapes(&shapes, peak);
        return;
    }
    if let Ok(shapes) = std::env::var("ONNXC_GEMM_SHAPES") {
        gemm_shapes(&shapes, peak);
        return;
    }
    // ONNXC_GEMM_TABLE: only the quick GEMM table below, no conv sections and no criterion.
    let table_only = std::env::var_os("ONNXC_GEMM_TABLE").is_some();
    if !table_only {
        conv_shapes(peak);
        conv_layers(peak);
    }
    let mut c = Criterion::default().configure_from_args().sample_size(10);
    println!(
        "{:>6} {:>12} {:>8} {:>14} {:>8}",
        "size", "B per call", "%peak", "B prepacked", "%peak"
    );
    for &s in &[64usize, 128, 256, 512, 1024] {
        let (m, n, k) = (s, s, s);
        let (_, b, ap, bp, mut cbuf, mut scratch) = operands(m, n, k);
        let mut run = |packed_b: bool| {
            packed_a_gemm((m, n, k), &ap, (&b, &bp, packed_b), &mut cbuf, &mut scratch)
        };
        // Quick direct measurement for the table: the best of 30 batches of ~3 ms per
        // variant, the two variants interleaved over ~0.2 s (a shared VM's slow spells last
        // longer than a batch, so a best of a few back-to-back batches can miss every fast one).
        let mut best = [f64::MAX; 2];
        let reps = (1 << 27) / (m * n * k) + 1;
        for _ in 0..30 {
            for (i, packed) in [false, true].into_iter().enumerate() {
                best[i] = best[i].min(best_per_call(1, reps, |_| run(packed)));
            }
        }
        let (g0, g1) = (gflops(m, n, k, best[0]), gflops(m, n, k, best[1]));
        println!(
            "{s:>6} {g0:>9.1} GF {:>7.0}% {g1:>11.1} GF {:>7.0}%",
            100.0 * g0 / peak,
            100.0 * g1 / peak
        );
        if table_only {
            continue;
        }
        let mut group = c.benchmark_group(format!("sgemm_{s}"));
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
        group.bench_function("b_per_call", |bch| bch.iter(|| run(false)));
        group.bench_function("b_prepacked", |bch| bch.iter(|| run(true)));
        group.finish();
    }
}

/// `ONNXC_GEMM_SHAPES=m,n,k,lda,ta,ldb,tb[;…]`: `onnxc_sgemm`'s path (A and B packed per
/// call) at chosen shapes and leading dimensions, e.g. attention's products read through head
/// views: `512,512,64,256,0,256,1;512,64,512,512,0,256,0`.
fn gemm_shapes(shapes: &str, peak: f64) {
    println!(
        "{:>5} {:>5} {:>5} {:>5} {:>2} {:>5} {:>2} {:>8} {:>6}",
        "m", "n", "k", "lda", "ta", "ldb", "tb", "GF/s", "%peak"
    );
    for shape in shapes.split(';').filter(|s| !s.is_empty()) {
        let v: Vec<usize> = shape
            .split(',')
            .map(|x| x.trim().parse().expect("a count"))
            .collect();
        let [m, n, k, lda, ta, ldb, tb] = v[..] else {
            panic!("ONNXC_GEMM_SHAPES wants m,n,k,lda,ta,ldb,tb per shape, got {shape}");
        };
        let (ta, tb) = (ta != 0, tb != 0);
        let a = data(if ta { k * lda } else { m * lda });
        let b = data(if tb { n * ldb } else { k * ldb });
        let mut c = Buf::zeros(m * n);
        let mut scratch =
            Buf::zeros(gemm::gemm_scratch(m, n, k, false).shared / 4 + gemm::scratch_len(n, false));
        let reps = (1 << 27) / (m * n * k) + 1;
        let secs = best_per_call(20, reps, |_| {
            // SAFETY: a, b and c hold the operands at these leading dimensions; scratch holds
            // gemm_scratch(m, n, k, false) for one worker.
            unsafe {
                gemm::gemm(
                    onnxc_runtime::par::Par::SEQ,
                    m,
                    n,
                    k,
                    a.as_ptr(),
                    lda,
                    ta,
                    BSource::Matrix {
                        b: b.as_ptr(),
                        ldb,
                        trans: tb,
                    },
                    c.as_mut_ptr(),
                    n,
                    &Epilogue::NONE,
                    scratch.as_mut_ptr(),
                )
            }
        });
        let g = gflops(m, n, k, secs);
        println!(
            "{m:>5} {n:>5} {k:>5} {lda:>5} {:>2} {ldb:>5} {:>2} {g:>8.1} {:>5.0}%",
            ta as u8,
            tb as u8,
            100.0 * g / peak
        );
    }
}

/// `ONNXC_ATTENTION=heads,m,n,d[,causal][;…]`: the fused attention kernel
/// (`onnxc_attention_f32`, one thread) over head views of `[1, seq, heads·d]` with a
/// `[1, 1, 1, n]` padding mask, as an exported encoder's attention block reads them, or
/// (`causal` 1) an `[m, n]` causal mask of −inf; GFLOP/s count its two products whole.
fn attention_shapes(shapes: &str, peak: f64) {
    use onnxc_runtime::attention::{AttentionParams, attention_f32};
    println!(
        "{:>5} {:>5} {:>5} {:>4} {:>9} {:>8} {:>6}",
        "heads", "m", "n", "d", "ms", "GF/s", "%peak"
    );
    for shape in shapes.split(';').filter(|s| !s.is_empty()) {
        let v: Vec<usize> = shape
            .split(',')
            .map(|x| x.trim().parse().expect("a count"))
            .collect();
        let (h, m, n, d, causal) = match v[..] {
            [h, m, n, d] => (h, m, n, d, false),
            [h, m, n, d, c] => (h, m, n, d, c != 0),
            _ => panic!("ONNXC_ATTENTION wants heads,m,n,d[,causal] per shape, got {shape}"),
        };
        let view = |rows: usize| [rows * h * d, d, h * d, 1];
        let p = AttentionParams {
            batch: [1, h],
            m,
            n,
            dk: d,
            dv: d,
            q: view(m),
            k: view(n),
            v: view(n),
            bias: Some(if causal { [0, 0, n, 1] } else { [n, 0, 0, 1] }),
            out: view(m),
            zero_inf_rows: false,
        };
        let [sq, sk, sv, sb, so] = p.spans();
        let (q, k, vv, mut b) = (data(sq), data(sk), data(sv), data(sb));
        if causal {
            for i in 0..m {
                for j in i + 1..n {
                    b[i * n + j] = f32::NEG_INFINITY;
                }
            }
        }
        let mut out = Buf::zeros(so);
        let need = p.scratch().rounded();
        let mut scratch = Buf::zeros((need.shared + need.per_worker) / 4);
        let reps = (1 << 27) / (2 * h * m * n * d) + 1;
        let secs = best_per_call(20, reps, |_| {
            // SAFETY: every operand holds its span, scratch one worker's need.
            unsafe {
                attention_f32(
                    &p,
                    0.125,
                    1.0,
                    q.as_ptr(),
                    k.as_ptr(),
                    vv.as_ptr(),
                    b.as_ptr(),
                    out.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                    onnxc_runtime::par::Par::SEQ,
                )
            }
        });
        let g = gflops(h * m, n, 2 * d, secs);
        println!(
            "{h:>5} {m:>5} {n:>5} {d:>4} {causal:>6} {:>9.3} {g:>8.1} {:>5.0}%",
            secs * 1e3,
            100.0 * g / peak
        );
    }
}

/// `ONNXC_EXP=pm`: a product with few positions (a 7×7 map: 49) and many channels, in both
/// orientations with pre-packed operands: channel-major (`gemm_packed_a`, weights as A,
/// positions the tile's 32-wide columns) and pixel-major (`gemm_packed_b`, weights as B,
/// positions the tile's 12 rows; A copied from a packed buffer per block).
fn orientation_experiment(peak: f64) {
    for &(ch, pos, k) in &[
        (512usize, 49usize, 2048usize),
        (512, 49, 4608),
        (2048, 49, 512),
        (256, 196, 1024),
    ] {
        let w = data(ch * k);
        let x = data(k * pos);
        let mut c = Buf::zeros(ch * pos);
        let mut wa = Buf::zeros(pack::packed_a_len(ch, k));
        let mut wb = Buf::zeros(pack::packed_b_len(k, ch));
        let mut xb = Buf::zeros(pack::packed_b_len(k, pos));
        let mut xa = Buf::zeros(pack::packed_a_len(pos, k));
        let mut ablock = Buf::zeros(gemm::packed_b_scratch_len());
        // SAFETY: w holds ch·k floats, x k·pos; wa, wb, xb, xa are their packed lengths.
        unsafe {
            pack::pack_a(w.as_ptr(), k, false, ch, k, wa.as_mut_ptr());
            pack::pack_b(w.as_ptr(), k, true, k, ch, wb.as_mut_ptr());
            pack::pack_b(x.as_ptr(), pos, false, k, pos, xb.as_mut_ptr());
            pack::pack_a(x.as_ptr(), pos, true, pos, k, xa.as_mut_ptr());
        }
        let flops = 2.0 * (ch * pos * k) as f64;
        let reps = (2e8 / flops) as usize + 1;
        let time = |f: &mut dyn FnMut()| flops / best_per_call(5, reps, |_| f()) / 1e9;
        // SAFETY: wa is w packed, xb x packed; c holds ch·pos floats.
        let cm = time(&mut || unsafe {
            gemm::gemm_packed_a(
                onnxc_runtime::par::Par::SEQ,
                ch,
                pos,
                k,
                wa.as_ptr(),
                BSource::Packed(xb.as_ptr()),
                c.as_mut_ptr(),
                pos,
                &Epilogue::NONE,
                onnxc_runtime::par::Slots::single(std::ptr::null_mut()),
            );
            black_box(c[0]);
        });
        let xap = xa.as_ptr() as usize;
        // SAFETY: a_panel_at gives panels i0/MR.. of xa, which hold ⌈mc/MR⌉·MR·kc floats; dst holds
        // as many (the packer contract).
        let packer = move |i0: usize, mc: usize, k0: usize, kc: usize, dst: *mut f32| unsafe {
            // The block's panels, copied from the fully packed A.
            let src = (xap as *const f32).add(pack::a_panel_at(pos, k0, kc, i0 / MR));
            std::ptr::copy_nonoverlapping(src, dst, mc.div_ceil(MR) * MR * kc);
        };
        // The pixel-major product C^T = A · W^T with A packed block by block by `packer`.
        let mut pixel_major = |packer: gemm::APacker<'_>| {
            // SAFETY: wb is w packed, c holds pos·ch floats, ablock packed_b_scratch_len();
            // the packers write ⌈mc/MR⌉ panels inside dst.
            time(&mut || unsafe {
                gemm::gemm_packed_b(
                    onnxc_runtime::par::Par::SEQ,
                    pos,
                    ch,
                    k,
                    packer,
                    wb.as_ptr(),
                    c.as_mut_ptr(),
                    ch,
                    onnxc_runtime::par::Slots::single(ablock.as_mut_ptr()),
                );
                black_box(c[0]);
            })
        };
        let pm = pixel_major(&packer);
        // SAFETY: the block's panels of x^T, zero past the last position.
        let pm_pack = pixel_major(
            &|i0: usize, mc: usize, k0: usize, kc: usize, dst: *mut f32| unsafe {
                for p in 0..mc.div_ceil(MR) {
                    for kx in 0..kc {
                        for r in 0..MR {
                            let i = i0 + p * MR + r;
                            *dst.add((p * kc + kx) * MR + r) =
                                if i < pos { x[(k0 + kx) * pos + i] } else { 0.0 };
                        }
                    }
                }
            },
        );
        println!("  pixel-major packing from x: {pm_pack:6.1} GF");
        if pos == 49 {
            use onnxc_runtime::conv::{ConvGeometry, conv_f32};
            let g = ConvGeometry {
                wide_simd: true,
                ..square_conv(k as i64, ch as i64, 7, 1, 1, 1)
            };
            let wpv = g.pack_weights(&w);
            let mut wp = Buf::zeros(wpv.len());
            wp.copy_from_slice(&wpv);
            let mut scratch = Buf::zeros(g.scratch_floats(true));
            // SAFETY: x, the packed weights, bias and y are sized from the geometry; scratch holds
            // g.scratch_floats(true).
            let conv = time(&mut || unsafe {
                conv_f32(
                    onnxc_runtime::par::Par::SEQ,
                    &g,
                    x.as_ptr(),
                    wp.as_ptr(),
                    true,
                    std::ptr::null(),
                    std::ptr::null(),
                    f32::NEG_INFINITY,
                    f32::INFINITY,
                    c.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                );
                black_box(c[0]);
            });
            println!(
                "  conv_f32 ({}): {conv:6.1} GF",
                if g.pixel_major() {
                    "pixel-major"
                } else {
                    "channel-major"
                }
            );
        }
        println!(
            "{ch:>5} ch {pos:>4} pos k {k:>5}: channel-major {cm:6.1} GF ({:.0}%), pixel-major {pm:6.1} GF ({:.0}%)",
            100.0 * cm / peak,
            100.0 * pm / peak
        );
    }
}

fn experiment() {
    let (m, n, k) = (64usize, 12544usize, 147usize);
    let (a, b, ap, bp, mut cbuf, mut scratch) = operands(m, n, k);
    let bpp = bp.as_ptr() as usize;
    let bias = data(m);
    let ep_relu = Epilogue {
        bias_row: bias.as_ptr(),
        bias_col: std::ptr::null(),
        residual: std::ptr::null(),
        lo: 0.0,
        hi: f32::INFINITY,
    };
    use onnxc_runtime::conv::conv_f32;
    let g = square_conv(3, 64, 224, 7, 2, 1);
    let x = data(3 * 224 * 224);
    let wp = g.pack_weights(&a);
    let mut cscratch = Buf::zeros(g.scratch_floats(true));
    if std::env::var("ONNXC_EXP").as_deref() == Ok("im2col") {
        for nc in [1024usize, 256, 64] {
            let mut dst = vec![0f32; 160 * 1024];
            let mut best = f64::MAX;
            for _ in 0..20 {
                let t = Instant::now();
                onnxc_runtime::conv::bench_im2col(&g, &x, &mut dst, nc);
                best = best.min(t.elapsed().as_secs_f64());
            }
            let floats = 147.0 * 12544.0;
            println!(
                "im2col nc={nc}: {:.3} ms, {:.2} GB/s written",
                best * 1e3,
                floats * 4.0 / best / 1e9
            );
        }
        return;
    }
    let mut best = [0f64; 7];
    for _round in 0..9 {
        let only: Option<usize> = std::env::var("ONNXC_EXP").ok().and_then(|v| v.parse().ok());
        #[allow(
            clippy::needless_range_loop,
            reason = "mode selects the variant measured"
        )]
        for mode in 0..7 {
            if only.is_some_and(|o| o != mode) {
                continue;
            }
            if mode == 6 {
                let reps = 20;
                let t = Instant::now();
                for _ in 0..reps {
                    // SAFETY: x, the packed weights, bias and y are sized from the geometry;
                    // scratch holds g.scratch_floats(true).
                    unsafe {
                        conv_f32(
                            onnxc_runtime::par::Par::SEQ,
                            &g,
                            x.as_ptr(),
                            wp.as_ptr(),
                            true,
                            bias.as_ptr(),
                            std::ptr::null(),
                            0.0,
                            f32::INFINITY,
                            cbuf.as_mut_ptr(),
                            cscratch.as_mut_ptr(),
                        )
                    };
                    black_box(cbuf[0]);
                }
                best[mode] =
                    best[mode].max(gflops(m, n, k, t.elapsed().as_secs_f64() / reps as f64));
                continue;
            }
            let copy = |pc: usize, kc: usize, jc: usize, nc: usize, dst: *mut f32| {
                assert!(pc == 0 && kc == k);
                if mode == 1 {
                    // SAFETY: bp holds ⌈n/16⌉·16·k floats, and columns jc..jc+nc of it are
                    // ⌈nc/16⌉·16·k from jc·k; dst holds as many.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            (bpp as *const f32).add(jc * k),
                            dst,
                            nc.div_ceil(16) * 16 * k,
                        )
                    };
                } else if mode == 2 || mode == 4 {
                    // SAFETY: b holds k·n floats; dst holds the block's packed ⌈nc/16⌉·16·kc
                    // floats.
                    unsafe { pack::pack_b_block(b.as_ptr(), n, false, pc, kc, jc, nc, dst) };
                }
            };
            let reps = 20;
            let t = Instant::now();
            for _ in 0..reps {
                let src = if mode == 0 {
                    BSource::Packed(bp.as_ptr())
                } else {
                    BSource::Custom(&copy)
                };
                let ep = if mode >= 4 { &ep_relu } else { &Epilogue::NONE };
                // SAFETY: ap is a packed, the B source k·n; cbuf holds m·n floats and scratch
                // scratch_len(n, false).
                unsafe {
                    gemm::gemm_packed_a(
                        onnxc_runtime::par::Par::SEQ,
                        m,
                        n,
                        k,
                        ap.as_ptr(),
                        src,
                        cbuf.as_mut_ptr(),
                        n,
                        ep,
                        onnxc_runtime::par::Slots::single(scratch.as_mut_ptr()),
                    )
                };
                black_box(cbuf[0]);
            }
            let g = gflops(m, n, k, t.elapsed().as_secs_f64() / reps as f64);
            best[mode] = best[mode].max(g);
        }
    }
    for mode in 0..7 {
        let name = [
            "prepacked",
            "memcpy block",
            "pack_b_block",
            "no pack (stale)",
            "pack + bias/relu",
            "stale + bias/relu",
            "conv_f32",
        ][mode];
        println!("{name:>16}: {:.1} GF/s", best[mode]);
    }
}
