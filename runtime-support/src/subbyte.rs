//! The 4- and 2-bit element types (int4, uint4, float4, int2, uint2) at the ABI: packed, the
//! first element in the low bits of the first byte, the unused high bits of the last byte 0
//! (ONNX's `TensorProto` layout and onnxruntime's). Inside a model each element takes one
//! byte (the integers sign- or zero-extended, float4 its code), so models unpack such inputs
//! on entry and pack such outputs on exit, with these kernels.

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
        let v = (byte >> ((i % per) as u32 * bits)) & mask;
        *out = if signed {
            (((v << (8 - bits)) as i8) >> (8 - bits)) as u8
        } else {
            v
        };
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
        // ONNX's layout: the first element in the low nibble.
        let mut p = [0u8; 1];
        pack_bits(&[0x1, 0x2], &mut p, 4);
        assert_eq!(p[0], 0x21);
    }
}
