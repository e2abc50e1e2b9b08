//! `ONNXC_EXP`: one-off experiments (`pm`: channel- against pixel-major orientation).

use super::*;

/// `ONNXC_EXP=pm`: a product with few positions (a 7×7 map: 49) and many channels, in both
/// orientations with pre-packed operands: channel-major (`gemm_packed_a`, weights as A,
/// positions the tile's 32-wide columns) and pixel-major (`gemm_packed_b`, weights as B,
/// positions the tile's 12 rows; A copied from a packed buffer per block).
pub(crate) fn orientation_experiment(peak: f64) {
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

pub(crate) fn experiment() {
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
