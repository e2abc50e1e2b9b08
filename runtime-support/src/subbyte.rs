//! The 4- and 2-bit element types (int4, uint4, float4, int2, uint2) at the ABI: packed, the
//! first element in the low bits of the first byte, the unused high bits of the last byte 0
//! (ONNX's `TensorProto` layout and onnxruntime's). Inside a model each element takes one
//! byte (the integers sign- or zero-extended, float4 its code), so models unpack such inputs
//! on entry and pack such outputs on exit, with these kernels; BitCast's reinterpretation of
//! those bytes is here too.

/// Elements per byte for a width of `bits` (4 or 2; anything else is read as 4).
fn per_byte(bits: u32) -> usize {
    if bits == 2 { 4 } else { 2 }
}

/// Packs the elements of `x` (one per byte, the low `bits` bits read) into `y`, which holds
/// `packed_len(x.len(), bits)` bytes.
pub fn pack_bits(x: &[u8], y: &mut [u8], bits: u32) {
    let per = per_byte(bits);
    let bits = 8 / per as u32;
    let mask = (1u8 << bits) - 1;
    for (out, c) in y.iter_mut().zip(x.chunks(per)) {
        *out = c
            .iter()
            .enumerate()
            .fold(0u8, |acc, (j, &v)| acc | ((v & mask) << (j as u32 * bits)));
    }
}

/// Unpacks `y.len()` elements from `x` (`packed_len(y.len(), bits)` bytes), sign-extending
/// them when `signed`.
pub fn unpack_bits(x: &[u8], y: &mut [u8], bits: u32, signed: bool) {
    let per = per_byte(bits);
    let bits = 8 / per as u32;
    let mask = (1u8 << bits) - 1;
    for (i, out) in y.iter_mut().enumerate() {
        let Some(&byte) = x.get(i / per) else {
            return;
        };
        *out = extend((byte >> ((i % per) as u32 * bits)) & mask, bits, signed);
    }
}

/// A `bits`-bit value `v` (its high bits 0) as one byte: sign-extended when `signed`.
fn extend(v: u8, bits: u32, signed: bool) -> u8 {
    if signed {
        (((v << (8 - bits)) as i8) >> (8 - bits)) as u8
    } else {
        v
    }
}

/// Bytes `n` packed elements of `bits` bits take.
pub fn packed_len(n: usize, bits: u32) -> usize {
    n.div_ceil(per_byte(bits))
}

/// C ABI entry point (`kernels::PACK_BITS`).
///
/// # Safety
/// `x` holds `n` bytes and `y` `packed_len(n, bits)` bytes; `n ≥ 0`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_pack_bits(x: *const u8, y: *mut u8, n: i64, bits: i64) {
    let n = n.max(0) as usize;
    let bits = bits as u32;
    // SAFETY: the caller passes buffers of these lengths.
    let (x, y) = unsafe {
        (
            std::slice::from_raw_parts(x, n),
            std::slice::from_raw_parts_mut(y, packed_len(n, bits)),
        )
    };
    pack_bits(x, y, bits)
}

/// C ABI entry point (`kernels::UNPACK_BITS`).
///
/// # Safety
/// `x` holds `packed_len(n, bits)` bytes and `y` `n` bytes; `n ≥ 0`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_unpack_bits(
    x: *const u8,
    y: *mut u8,
    n: i64,
    bits: i64,
    signed: i64,
) {
    let n = n.max(0) as usize;
    let bits = bits as u32;
    // SAFETY: the caller passes buffers of these lengths.
    let (x, y) = unsafe {
        (
            std::slice::from_raw_parts(x, packed_len(n, bits)),
            std::slice::from_raw_parts_mut(y, n),
        )
    };
    unpack_bits(x, y, bits, signed != 0)
}

/// BitCast's bytes: `x` (`y.len()` bytes, the source's internal form) reinterpreted as the
/// target's internal form: a 4- or 2-bit target (`bits` 4 or 2; 0 for others) keeps the low
/// `bits` bits, sign-extended when `signed`; a bool target is normalized to 0/1 (the form
/// generated code relies on).
pub fn bit_cast(x: &[u8], y: &mut [u8], bits: u32, signed: bool, to_bool: bool) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = if to_bool {
            (v != 0) as u8
        } else if bits == 4 || bits == 2 {
            extend(v & ((1u8 << bits) - 1), bits, signed)
        } else {
            v
        };
    }
}

/// C ABI entry point (`kernels::BIT_CAST`).
///
/// # Safety
/// `x` and `y` hold `n` bytes each; `n ≥ 0`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_bit_cast(
    x: *const u8,
    y: *mut u8,
    n: i64,
    bits: i64,
    signed: i64,
    to_bool: i64,
) {
    let n = n.max(0) as usize;
    // SAFETY: the caller passes buffers of n bytes.
    let (x, y) = unsafe {
        (
            std::slice::from_raw_parts(x, n),
            std::slice::from_raw_parts_mut(y, n),
        )
    };
    bit_cast(x, y, bits as u32, signed != 0, to_bool != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_an_odd_tail() {
        for (bits, signed, vals) in [
            (4, true, vec![-8i8, 7, -1, 0, 3]),
            (4, false, vec![15, 0, 9]),
            (2, true, vec![-2, 1, -1, 0, 1, -2, 0]),
            (2, false, vec![3, 0, 2, 1, 3]),
        ] {
            let x: Vec<u8> = vals.iter().map(|&v| v as u8).collect();
            let mut packed = vec![0xAA; packed_len(x.len(), bits)];
            pack_bits(&x, &mut packed, bits);
            let mut back = vec![0u8; x.len()];
            unpack_bits(&packed, &mut back, bits, signed);
            let want: Vec<u8> = if signed {
                x.clone()
            } else {
                x.iter().map(|v| v & ((1 << bits) - 1)).collect()
            };
            assert_eq!(back, want, "bits {bits} signed {signed}");
            // The last byte's unused bits are zero.
            let used = (x.len() * bits as usize) % 8;
            if used != 0 {
                assert_eq!(packed[packed.len() - 1] >> used, 0);
            }
        }
        // BitCast between 4-bit types: the low nibble, sign-extended for int4.
        let mut y = [0u8; 2];
        bit_cast(&[0xF, 0x7], &mut y, 4, true, false);
        assert_eq!(y, [0xFF, 0x07]);
        bit_cast(&[0xFF, 0x07], &mut y, 4, false, false);
        assert_eq!(y, [0x0F, 0x07]);
        bit_cast(&[2, 0], &mut y, 0, false, true);
        assert_eq!(y, [1, 0]);
        // ONNX's layout: the first element in the low nibble.
        let mut p = [0u8; 1];
        pack_bits(&[0x1, 0x2], &mut p, 4);
        assert_eq!(p[0], 0x21);
    }
}
