//! Low-precision float formats: float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0) and float4
//! (E2M1), each held in one byte (the 4-bit code in the low nibble). Generated code computes
//! in float32 and calls these to load (`onnxc_lowp_to_f32`), round (`onnxc_lowp_round`) and
//! store (`onnxc_lowp_from_f32`); the compiler folds constants with the same functions.
//!
//! Semantics are ONNX's (`Cast` and `QuantizeLinear`, as onnx's reference evaluator computes
//! them with `ml_dtypes`): round to nearest even; a saturating conversion clamps to the largest
//! finite value first (NaN stays NaN), a non-saturating one overflows to infinity (E5M2) or NaN
//! (the formats without infinity). E2M1 has neither: it always saturates and NaN becomes -0,
//! as `ml_dtypes` does. E8M0 is an unsigned power of two (2^(bits-127), 0xFF NaN) and rounds up
//! (`Cast`'s default `round_mode`).
//!
//! A format is named by its ONNX `TensorProto.DataType` code (17-20, 23, 24).

/// How a layout spends its codes on infinities and NaNs.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Special {
    /// ±infinity (exponent all ones, mantissa 0) and NaNs (mantissa not 0), as IEEE 754.
    Ieee,
    /// "FN": no infinity; exponent and mantissa all ones is NaN.
    AllOnesNan,
    /// "FNUZ": no infinity, no negative zero; its code (sign bit alone) is the only NaN.
    Uz,
    /// Neither infinity nor NaN (E2M1): conversions saturate.
    None,
}

/// One sign-exponent-mantissa layout.
#[derive(Copy, Clone, Debug)]
struct Layout {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    special: Special,
    /// Largest finite value.
    max: f64,
    /// The code a conversion writes for NaN (positive sign).
    nan: u8,
}

const E4M3FN: Layout = Layout {
    exp_bits: 4,
    man_bits: 3,
    bias: 7,
    special: Special::AllOnesNan,
    max: 448.0,
    nan: 0x7F,
};
const E4M3FNUZ: Layout = Layout {
    exp_bits: 4,
    man_bits: 3,
    bias: 8,
    special: Special::Uz,
    max: 240.0,
    nan: 0x80,
};
const E5M2: Layout = Layout {
    exp_bits: 5,
    man_bits: 2,
    bias: 15,
    special: Special::Ieee,
    max: 57344.0,
    nan: 0x7F,
};
const E5M2FNUZ: Layout = Layout {
    exp_bits: 5,
    man_bits: 2,
    bias: 16,
    special: Special::Uz,
    max: 57344.0,
    nan: 0x80,
};
/// No infinity and no NaN: NaN converts to -0 (`ml_dtypes`).
const E2M1: Layout = Layout {
    exp_bits: 2,
    man_bits: 1,
    bias: 1,
    special: Special::None,
    max: 6.0,
    nan: 0x08,
};

/// The ONNX type codes of the formats here.
pub const FLOAT8E4M3FN: u32 = 17;
pub const FLOAT8E4M3FNUZ: u32 = 18;
pub const FLOAT8E5M2: u32 = 19;
pub const FLOAT8E5M2FNUZ: u32 = 20;
pub const FLOAT4E2M1: u32 = 23;
pub const FLOAT8E8M0: u32 = 24;

fn layout(fmt: u32) -> Option<Layout> {
    Some(match fmt {
        FLOAT8E4M3FN => E4M3FN,
        FLOAT8E4M3FNUZ => E4M3FNUZ,
        FLOAT8E5M2 => E5M2,
        FLOAT8E5M2FNUZ => E5M2FNUZ,
        FLOAT4E2M1 => E2M1,
        _ => return None,
    })
}

/// Whether `fmt` is one of the codes this module converts.
pub fn is_format(fmt: u32) -> bool {
    fmt == FLOAT8E8M0 || layout(fmt).is_some()
}

/// The value of code `bits` (only the format's low bits are read). An unknown format gives
/// NaN.
pub fn decode(fmt: u32, bits: u8) -> f32 {
    if fmt == FLOAT8E8M0 {
        return if bits == 0xFF {
            f32::NAN
        } else {
            (2f64).powi(bits as i32 - 127) as f32
        };
    }
    let Some(l) = layout(fmt) else {
        return f32::NAN;
    };
    let width = 1 + l.exp_bits + l.man_bits;
    let bits = bits as u32 & ((1 << width) - 1);
    let sign_bit = 1 << (width - 1);
    if l.special == Special::Uz && bits == sign_bit {
        return f32::NAN;
    }
    let exp = (bits >> l.man_bits) & ((1 << l.exp_bits) - 1);
    let man = bits & ((1 << l.man_bits) - 1);
    let exp_max = (1 << l.exp_bits) - 1;
    let man_max = (1 << l.man_bits) - 1;
    let magnitude = if l.special == Special::Ieee && exp == exp_max {
        if man == 0 { f64::INFINITY } else { f64::NAN }
    } else if l.special == Special::AllOnesNan && exp == exp_max && man == man_max {
        f64::NAN
    } else if exp == 0 {
        man as f64 * (2f64).powi(1 - l.bias - l.man_bits as i32)
    } else {
        (1.0 + man as f64 / (1 << l.man_bits) as f64) * (2f64).powi(exp as i32 - l.bias)
    };
    let v = if bits & sign_bit != 0 {
        -magnitude
    } else {
        magnitude
    };
    v as f32
}

/// The code of `x` rounded to nearest even, without saturation: a value beyond the largest
/// finite one becomes infinity (E5M2) or NaN (E4M3FN, the UZ formats); E2M1 saturates (it has
/// neither). E8M0 rounds up, past 2^127 to NaN.
pub fn encode(fmt: u32, x: f32) -> u8 {
    if fmt == FLOAT8E8M0 {
        return encode_e8m0(x, false);
    }
    let Some(l) = layout(fmt) else {
        return 0;
    };
    let width = 1 + l.exp_bits + l.man_bits;
    let sign = if x.is_sign_negative() {
        1u32 << (width - 1)
    } else {
        0
    };
    if x.is_nan() {
        return l.nan;
    }
    let overflow = |sign: u32| -> u8 {
        match l.special {
            // Infinity: exponent all ones, mantissa 0.
            Special::Ieee => (sign | (((1 << l.exp_bits) - 1) << l.man_bits)) as u8,
            // The largest finite value: all ones but the sign.
            Special::None => (sign | ((1 << (width - 1)) - 1)) as u8,
            Special::AllOnesNan | Special::Uz => l.nan,
        }
    };
    let a = (x as f64).abs();
    if a.is_infinite() {
        return overflow(sign);
    }
    // The quantum of `a`'s binade, the subnormal one below the smallest normal exponent.
    let emin = 1 - l.bias;
    let e = if a == 0.0 {
        emin
    } else {
        exponent(a).max(emin)
    };
    let q = (2f64).powi(e - l.man_bits as i32);
    let r = round_half_even(a / q) * q;
    if r > l.max {
        return overflow(sign);
    }
    if r == 0.0 {
        return if l.special == Special::Uz {
            0
        } else {
            sign as u8
        };
    }
    let (exp, man) = if r < (2f64).powi(emin) {
        (0u32, (r / (2f64).powi(emin - l.man_bits as i32)) as u32)
    } else {
        let e = exponent(r);
        let m = (r / (2f64).powi(e - l.man_bits as i32)) as u32 - (1 << l.man_bits);
        ((e + l.bias) as u32, m)
    };
    (sign | (exp << l.man_bits) | man) as u8
}

/// `floor(log2(a))` of a positive normal float64, exactly: its biased exponent field (every
/// value here comes from a float32 or is a rounding of one, so none is subnormal in float64).
fn exponent(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7FF) as i32 - 1023
}

fn round_half_even(v: f64) -> f64 {
    let r = v.round();
    if (r - v).abs() == 0.5 && r % 2.0 != 0.0 {
        r - v.signum()
    } else {
        r
    }
}

/// E8M0 of `|x|`, rounding up: a float32 with a fraction takes the next exponent; with
/// `saturate`, not past 2^127 (0xFE); NaN and infinity give 0xFF (NaN).
pub fn encode_e8m0(x: f32, saturate: bool) -> u8 {
    let bits = x.to_bits();
    let exp = (bits >> 23) & 0xFF;
    if exp == 0xFF {
        return 0xFF;
    }
    let fraction = bits & 0x7F_FFFF != 0;
    let up = fraction && !(saturate && exp == 0xFE);
    (exp + up as u32) as u8
}

/// `x` converted to the format and back (`decode(encode(x))`): rounded to nearest even,
/// overflowing to infinity or NaN. ONNX's saturating conversions (`Cast`'s default,
/// `QuantizeLinear`) clamp to `[-max_finite, max_finite]` first, NaN left as it is.
pub fn round(fmt: u32, x: f32) -> f32 {
    decode(fmt, encode(fmt, x))
}

/// The largest finite value of the format (NaN for an unknown code).
pub fn max_finite(fmt: u32) -> f32 {
    if fmt == FLOAT8E8M0 {
        return (2f32).powi(127);
    }
    layout(fmt).map_or(f32::NAN, |l| l.max as f32)
}

// The entry points generated code calls.

/// A low-precision code → float32 (`fmt`: the ONNX type code).
#[unsafe(no_mangle)]
pub extern "C" fn onnxc_lowp_to_f32(bits: u32, fmt: u32) -> f32 {
    decode(fmt, bits as u8)
}

/// A float32 already representable in the format → its code (`encode`).
#[unsafe(no_mangle)]
pub extern "C" fn onnxc_lowp_from_f32(x: f32, fmt: u32) -> u32 {
    encode(fmt, x) as u32
}

/// A float32 rounded to the format (`round`: not saturating; the compiler clamps first
/// where ONNX saturates).
#[unsafe(no_mangle)]
pub extern "C" fn onnxc_lowp_round(x: f32, fmt: u32) -> f32 {
    round(fmt, x)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [u32; 6] = [
        FLOAT8E4M3FN,
        FLOAT8E4M3FNUZ,
        FLOAT8E5M2,
        FLOAT8E5M2FNUZ,
        FLOAT4E2M1,
        FLOAT8E8M0,
    ];

    #[test]
    fn every_code_round_trips() {
        for fmt in ALL {
            let n = if fmt == FLOAT4E2M1 { 16 } else { 256 };
            for b in 0..n {
                let v = decode(fmt, b as u8);
                // E8M0's code 0 is 2^-127, a float32 subnormal with a fraction: the
                // reference's rounding up takes it to code 1.
                if fmt == FLOAT8E8M0 && b == 0 {
                    assert_eq!(encode(fmt, v), 1);
                    continue;
                }
                if v.is_nan() {
                    assert!(
                        decode(fmt, encode(fmt, v)).is_nan(),
                        "fmt {fmt} code {b:#x}"
                    );
                    continue;
                }
                assert_eq!(encode(fmt, v), b as u8, "fmt {fmt} code {b:#x} value {v}");
            }
        }
    }

    #[test]
    fn known_values() {
        // Largest finite values, and one NaN code per format.
        assert_eq!(decode(FLOAT8E4M3FN, 0x7E), 448.0);
        assert!(decode(FLOAT8E4M3FN, 0x7F).is_nan());
        assert_eq!(decode(FLOAT8E4M3FNUZ, 0x7F), 240.0);
        assert!(decode(FLOAT8E4M3FNUZ, 0x80).is_nan());
        assert_eq!(decode(FLOAT8E5M2, 0x7B), 57344.0);
        assert_eq!(decode(FLOAT8E5M2, 0x7C), f32::INFINITY);
        assert_eq!(decode(FLOAT8E5M2FNUZ, 0x7F), 57344.0);
        assert_eq!(decode(FLOAT4E2M1, 0x7), 6.0);
        assert_eq!(decode(FLOAT4E2M1, 0xF), -6.0);
        assert_eq!(decode(FLOAT8E8M0, 127), 1.0);
        assert_eq!(decode(FLOAT8E8M0, 0), (2f32).powi(-127));
        // Smallest subnormals.
        assert_eq!(decode(FLOAT8E4M3FN, 0x01), (2f32).powi(-9));
        assert_eq!(decode(FLOAT8E5M2, 0x01), (2f32).powi(-16));
        assert_eq!(decode(FLOAT4E2M1, 0x1), 0.5);
    }

    /// Values `ml_dtypes` gives (onnx's reference evaluator), non-saturating (`astype`).
    #[test]
    fn matches_ml_dtypes() {
        let x = [
            448.0, 464.0, 465.0, 480.0, 500.0, 57344.0, 61440.0, 61441.0, 1e6,
        ];
        let cases: [(u32, [u8; 9]); 4] = [
            (FLOAT8E4M3FN, [126, 126, 127, 127, 127, 127, 127, 127, 127]),
            (FLOAT8E4M3FNUZ, [128; 9]),
            (FLOAT8E5M2, [95, 95, 95, 96, 96, 123, 124, 124, 124]),
            (FLOAT8E5M2FNUZ, [99, 99, 99, 100, 100, 127, 128, 128, 128]),
        ];
        for (fmt, want) in cases {
            for (v, w) in x.iter().zip(want) {
                assert_eq!(encode(fmt, *v), w, "fmt {fmt} value {v}");
            }
        }
        assert_eq!(encode(FLOAT8E5M2, f32::INFINITY), 124);
        assert_eq!(encode(FLOAT8E5M2, f32::NEG_INFINITY), 252);
        assert_eq!(encode(FLOAT8E4M3FN, -0.0), 0x80);
        assert_eq!(encode(FLOAT8E4M3FNUZ, -0.0), 0);
        assert_eq!(encode(FLOAT8E4M3FN, 1e-9), 0);
        // E2M1: ties to even, saturation, NaN → -0.
        let f4 = [
            0.4,
            0.5,
            1.5,
            2.5,
            7.6,
            8.0,
            -9.0,
            f32::NAN,
            f32::INFINITY,
            -0.25,
        ];
        let want = [1, 1, 3, 4, 7, 7, 15, 8, 7, 8];
        for (v, w) in f4.iter().zip(want) {
            assert_eq!(encode(FLOAT4E2M1, *v), w, "E2M1 value {v}");
        }
    }

    /// ONNX's saturating conversion: clamp to the largest finite value, then round.
    fn saturating(fmt: u32, x: f32) -> f32 {
        let m = max_finite(fmt);
        round(fmt, if x.is_nan() { x } else { x.clamp(-m, m) })
    }

    #[test]
    fn saturating_rounding() {
        assert_eq!(saturating(FLOAT8E4M3FN, 1e6), 448.0);
        assert_eq!(saturating(FLOAT8E4M3FN, 460.0), 448.0);
        assert_eq!(saturating(FLOAT8E4M3FN, -f32::INFINITY), -448.0);
        assert!(saturating(FLOAT8E4M3FN, f32::NAN).is_nan());
        assert_eq!(saturating(FLOAT8E5M2, f32::INFINITY), 57344.0);
        assert_eq!(saturating(FLOAT8E4M3FNUZ, 250.0), 240.0);
        // E8M0 rounds up, 0 is its smallest code; it saturates at 2^127.
        assert_eq!(saturating(FLOAT8E8M0, 1.1), 2.0);
        assert_eq!(saturating(FLOAT8E8M0, 0.124), 0.125);
        assert_eq!(saturating(FLOAT8E8M0, 0.0), (2f32).powi(-127));
        assert_eq!(saturating(FLOAT8E8M0, f32::MAX), (2f32).powi(127));
        assert!(round(FLOAT8E8M0, f32::MAX).is_nan());
        // Not saturating: infinity or NaN.
        assert_eq!(round(FLOAT8E5M2, 1e6), f32::INFINITY);
        assert!(round(FLOAT8E4M3FN, 465.0).is_nan());
        assert_eq!(round(FLOAT8E4M3FN, 464.0), 448.0);
        // E2M1 has neither: it saturates, NaN becomes -0.
        assert_eq!(round(FLOAT4E2M1, 100.0), 6.0);
        let z = round(FLOAT4E2M1, f32::NAN);
        assert!(z == 0.0 && z.is_sign_negative());
    }
}
