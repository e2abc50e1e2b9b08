//! Tap tables of one resized axis: the source coordinate of each output position (the
//! reference's coordinate transformations), the nearest input index, and the indices and
//! weights of the linear, cubic and antialiased filters, as expressions over the output
//! position that `resize_impl` builds into table maps.

use crate::ir::expr::{self, BinOp, E};
use crate::ir::{DType, Scalar};

#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Nearest {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
    /// Opsets < 11 (onnxruntime's "simple"): floor when upsampling, ceil when downsampling.
    Simple,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Mode {
    Nearest(Nearest),
    Linear,
    Cubic(f64),
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
    /// Resize-11/12's `(y + 0.5) / scale`: half-pixel centres without the final shift.
    TfHalfPixelForNn,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Params {
    pub(super) mode: Mode,
    pub(super) coord: Coord,
    pub(super) exclude_outside: bool,
    pub(super) antialias: bool,
}

pub(super) fn c64(v: f64) -> E {
    expr::f(DType::F64, v)
}
pub(super) fn bin(op: BinOp, a: &E, b: &E) -> E {
    expr::binary(op, a.clone(), b.clone())
}

/// An axis to resize: its lengths, its scale as an f64 expression (constant, or loaded from
/// an operand of the table maps), and for `tf_crop_and_resize` its roi as f64 expressions
/// (`roi_end - roi_start` and `roi_start · (n_in − 1)`, computed in the roi's precision as
/// the reference does).
pub(super) struct Axis {
    pub(super) axis: usize,
    pub(super) n_in: i64,
    pub(super) n_out: i64,
    pub(super) scale: E,
    pub(super) roi: Option<(E, E)>,
}

/// Source coordinate of output position `y` (the reference's `_compute_x_ori`, same
/// operation order) and, for `tf_crop_and_resize`, whether it lies outside the input.
fn source_coord(coord: Coord, ax: &Axis, y: &E) -> (E, Option<E>) {
    use BinOp::*;
    let s = &ax.scale;
    let input_width = c64(ax.n_in as f64);
    let output_width = bin(Mul, s, &input_width);
    let ow_is_1 = bin(Eq, &output_width, &c64(1.0));
    let half_pixel = || bin(Sub, &bin(Div, &bin(Add, y, &c64(0.5)), s), &c64(0.5));
    match coord {
        Coord::AlignCorners => (
            expr::select(
                ow_is_1,
                c64(0.0),
                bin(
                    Div,
                    &bin(Mul, y, &c64((ax.n_in - 1) as f64)),
                    &bin(Sub, &output_width, &c64(1.0)),
                ),
            ),
            None,
        ),
        Coord::Asymmetric => (bin(Div, y, s), None),
        Coord::TfCropAndResize => {
            let (d, start) = ax.roi.clone().expect("roi for tf_crop_and_resize");
            let span = bin(Mul, &d, &c64((ax.n_in - 1) as f64));
            let x = expr::select(
                ow_is_1,
                bin(Div, &span, &c64(2.0)),
                bin(
                    Div,
                    &bin(Mul, &bin(Mul, y, &d), &c64((ax.n_in - 1) as f64)),
                    &bin(Sub, &output_width, &c64(1.0)),
                ),
            );
            let x = bin(Add, &x, &start);
            let outside = bin(
                Or,
                &bin(Lt, &x, &c64(0.0)),
                &bin(Gt, &x, &c64((ax.n_in - 1) as f64)),
            );
            (x, Some(outside))
        }
        Coord::PytorchHalfPixel => (expr::select(ow_is_1, c64(-0.5), half_pixel()), None),
        Coord::HalfPixel => (half_pixel(), None),
        // In float32, as onnxruntime (the one implementation) computes it: 1.5 / 0.6f is
        // 2.5 there, a nearest tap apart from float64's 2.4999999.
        Coord::TfHalfPixelForNn => {
            let f32 = |e: &E| expr::cast(e.clone(), DType::F32);
            let x = bin(Div, &f32(&bin(Add, y, &c64(0.5))), &f32(s));
            (expr::cast(x, DType::F64), None)
        }
        Coord::HalfPixelSymmetric => {
            let adjustment = bin(Div, &c64(ax.n_out as f64), &output_width);
            let center = c64(ax.n_in as f64 / 2.0);
            let offset = bin(Mul, &center, &bin(Sub, &c64(1.0), &adjustment));
            let x = bin(Add, &offset, &bin(Div, &bin(Add, y, &c64(0.5)), s));
            (bin(Sub, &x, &c64(0.5)), None)
        }
    }
}

/// Output position → input index for the nearest modes, as an i64 expression over `var(0)`:
/// the index clamped into the input, or `-1` where `tf_crop_and_resize` extrapolates, or
/// `-2` where `exclude_outside` drops the only tap (the reference then outputs 0).
pub(super) fn nearest_index(p: &Params, mode: Nearest, ax: &Axis) -> E {
    use BinOp::*;
    let y = expr::cast(expr::var(0), DType::F64);
    let (x, outside) = source_coord(p.coord, ax, &y);
    let xi = expr::unary(expr::UnOp::Floor, x.clone());
    let r = bin(Sub, &x, &xi);
    // The reference weighs two neighbors: at an integer x, x − 1 and x (taking x); otherwise
    // xi and xi + 1, by the mode. It finds them from x + 1 (its edge padding), which can
    // round to an integer where x is not (x = 1 + 2^-52 from a symmetric offset's rounding
    // error): then the pair is x − 1, x, as it would be for the exact x. Same here.
    let up = match mode {
        Nearest::RoundPreferFloor => bin(Gt, &r, &c64(0.5)),
        Nearest::RoundPreferCeil => bin(Ge, &r, &c64(0.5)),
        Nearest::Floor => expr::konst(DType::Bool, Scalar::B(false)),
        Nearest::Ceil => expr::konst(DType::Bool, Scalar::B(true)),
        Nearest::Simple => bin(Lt, &ax.scale, &c64(1.0)),
    };
    let up = bin(Or, &bin(Eq, &x, &xi), &up);
    let xp = bin(Add, &x, &c64(1.0));
    let pp = expr::unary(expr::UnOp::Floor, xp.clone());
    let first = expr::select(
        bin(Eq, &xp, &pp),
        bin(Sub, &pp, &c64(2.0)),
        bin(Sub, &pp, &c64(1.0)),
    );
    let idx = expr::select(up, bin(Add, &first, &c64(1.0)), first);
    let idx = expr::cast(idx, DType::I64);
    let mut t = expr::clamp(idx.clone(), 0, ax.n_in - 1);
    if p.exclude_outside {
        let inside = bin(
            And,
            &expr::ge(idx.clone(), expr::i(0)),
            &expr::lt(idx, expr::i(ax.n_in)),
        );
        t = expr::select(inside, t, expr::i(-2));
    }
    if let Some(o) = outside {
        t = expr::select(o, expr::i(-1), t);
    }
    t
}

/// How many taps the filter reads for `scale` (the reference's footprints: 2 for linear,
/// 4 for cubic, wider when antialiasing a downscale).
pub(super) fn tap_count(p: &Params, scale: f64) -> usize {
    let s = if p.antialias { scale.min(1.0) } else { 1.0 };
    let support = match p.mode {
        Mode::Cubic(_) => 2.0,
        _ => 1.0,
    };
    (2.0 - 2.0 * ((-support / s).floor() + 1.0)) as usize
}

/// Tap tables of a linear or cubic axis, as expressions over `var(0)` = output position and
/// `var(1)` = tap: the clamped input index (`-1` in every tap where `tf_crop_and_resize`
/// extrapolates) and the weight (f64). `taps` is even; taps beyond the filter's support get
/// weight 0, so a window wider than the reference's (a run-time antialias scale bounded from
/// below) computes the same result.
pub(super) fn weighted_taps(p: &Params, ax: &Axis, taps: usize) -> (E, E) {
    use BinOp::*;
    let y = expr::cast(expr::var(0), DType::F64);
    let (x, outside) = source_coord(p.coord, ax, &y);
    // The `taps` inputs nearest to x (ties to the smaller), as the reference's edge-padded
    // neighbor search picks them.
    let half = (taps / 2) as f64;
    let xp = bin(Add, &x, &c64(half));
    let pp = expr::unary(expr::UnOp::Floor, xp.clone());
    let on = bin(Eq, &xp, &pp);
    let start = bin(
        Sub,
        &bin(Add, &pp, &expr::select(on, c64(-half), c64(1.0 - half))),
        &c64(half),
    );
    let filter_scale = if p.antialias {
        bin(Min, &ax.scale, &c64(1.0))
    } else {
        c64(1.0)
    };
    let index_at = |k: E| bin(Add, &start, &expr::cast(k, DType::F64));
    let coef = |k: E| -> E {
        let i = index_at(k);
        let d = bin(Mul, &bin(Sub, &i, &x), &filter_scale);
        let ad = expr::unary(expr::UnOp::Abs, d);
        let w = match p.mode {
            Mode::Cubic(a) => {
                let (a, ad2) = (c64(a), bin(Mul, &ad, &ad));
                let ad3 = bin(Mul, &ad2, &ad);
                let near = bin(
                    Add,
                    &bin(
                        Sub,
                        &bin(Mul, &bin(Add, &a, &c64(2.0)), &ad3),
                        &bin(Mul, &bin(Add, &a, &c64(3.0)), &ad2),
                    ),
                    &c64(1.0),
                );
                let far = bin(
                    Sub,
                    &bin(
                        Add,
                        &bin(
                            Sub,
                            &bin(Mul, &a, &ad3),
                            &bin(Mul, &bin(Mul, &c64(5.0), &a), &ad2),
                        ),
                        &bin(Mul, &bin(Mul, &c64(8.0), &a), &ad),
                    ),
                    &bin(Mul, &c64(4.0), &a),
                );
                expr::select(
                    bin(Le, &ad, &c64(1.0)),
                    near,
                    expr::select(bin(Lt, &ad, &c64(2.0)), far, c64(0.0)),
                )
            }
            _ => bin(Max, &bin(Sub, &c64(1.0), &ad), &c64(0.0)),
        };
        if p.exclude_outside {
            let inside = bin(
                And,
                &bin(Ge, &i, &c64(0.0)),
                &bin(Le, &i, &c64((ax.n_in - 1) as f64)),
            );
            expr::select(inside, w, c64(0.0))
        } else {
            w
        }
    };
    let mut w = coef(expr::var(1));
    if p.antialias || p.exclude_outside {
        let sum = (0..taps)
            .map(|k| coef(expr::i(k as i64)))
            .reduce(|a, b| bin(Add, &a, &b))
            .expect("taps > 0");
        let sum = expr::select(bin(Eq, &sum, &c64(0.0)), c64(1.0), sum);
        w = bin(Div, &w, &sum);
    }
    let i = expr::cast(index_at(expr::var(1)), DType::I64);
    let mut idx = expr::clamp(i, 0, ax.n_in - 1);
    if let Some(o) = outside {
        idx = expr::select(o, expr::i(-1), idx);
    }
    (idx, w)
}
