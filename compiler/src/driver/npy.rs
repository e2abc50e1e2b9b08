//! Minimal reader for NumPy `.npy` files (format 1.0–3.0, C order, little-endian).

use crate::error::{Error, Result};
use crate::ir::{DType, Tensor};

pub fn read_npy(bytes: &[u8], what: &str) -> Result<Tensor> {
    let bad = |m: &str| Error::Usage(format!("{what}: not a valid .npy file: {m}"));
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("missing magic"));
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        _ => return Err(bad("unknown version")),
    };
    let header = bytes
        .get(start..start + hlen)
        .ok_or_else(|| bad("truncated header"))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("header is not text"))?;
    let field = |key: &str| -> Option<&str> {
        let i = header.find(&format!("'{key}'"))?;
        let rest = &header[i + key.len() + 2..];
        let rest = rest.trim_start().strip_prefix(':')?.trim_start();
        Some(rest)
    };
    let descr = field("descr")
        .and_then(|r| r.strip_prefix('\''))
        .and_then(|r| r.split('\'').next())
        .ok_or_else(|| bad("no descr"))?;
    if field("fortran_order").is_some_and(|r| r.starts_with("True")) {
        return Err(bad(
            "Fortran order is not supported; save with np.ascontiguousarray",
        ));
    }
    let shape_s = field("shape")
        .and_then(|r| r.strip_prefix('('))
        .and_then(|r| r.split(')').next())
        .ok_or_else(|| bad("no shape"))?;
    let shape: Vec<i64> = shape_s
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .ok()
                .filter(|&d| d >= 0)
                .ok_or_else(|| bad(&format!("bad shape ({shape_s})")))
        })
        .collect::<Result<_>>()?;
    // The limits every tensor file meets (as a TensorProto's dims); then the element count
    // cannot overflow.
    crate::ir::dim::check_size(&shape).map_err(|m| bad(&m))?;
    let n = shape.iter().product::<i64>() as usize;
    let data = &bytes[start + hlen..];
    if let Some(t) = read_strings(descr, &shape, n, data, &bad)? {
        return Ok(t);
    }
    let dtype = match descr {
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "<f2" => DType::F16,
        "|i1" => DType::I8,
        "|u1" => DType::U8,
        "<i2" => DType::I16,
        "<u2" => DType::U16,
        "<i4" => DType::I32,
        "<u4" => DType::U32,
        "<i8" => DType::I64,
        "<u8" => DType::U64,
        "|b1" => DType::Bool,
        "|O" => {
            return Err(bad(
                "an object array (dtype=object) is pickled Python objects; save strings as \
                 np.array(values, dtype=str), or as a TensorProto .pb file",
            ));
        }
        other => return Err(bad(&format!("element type '{other}' is not supported"))),
    };
    let need = n.checked_mul(dtype.size());
    if need != Some(data.len()) {
        return Err(bad(&format!(
            "holds {} data bytes, shape {shape:?} needs {}",
            data.len(),
            need.map_or("more".to_string(), |x| x.to_string())
        )));
    }
    Ok(Tensor::new(dtype, shape, data.to_vec()))
}

/// A string array: `<U{w}` (NumPy's `str`: `w` UTF-32 code points per element) or `|S{w}`
/// (`bytes`: `w` bytes per element), each element padded with NULs at its end, which NumPy
/// strips. None for other element types.
fn read_strings(
    descr: &str,
    shape: &[i64],
    n: usize,
    data: &[u8],
    bad: &dyn Fn(&str) -> Error,
) -> Result<Option<Tensor>> {
    let (unit, width) = if let Some(w) = descr.strip_prefix("<U") {
        (4, w)
    } else if let Some(w) = descr.strip_prefix("|S") {
        (1, w)
    } else {
        return Ok(None);
    };
    let width: usize = width
        .parse()
        .map_err(|_| bad(&format!("element type '{descr}' has no width")))?;
    let need = n.checked_mul(width).and_then(|x| x.checked_mul(unit));
    if need != Some(data.len()) {
        return Err(bad(&format!(
            "holds {} data bytes, shape {shape:?} of '{descr}' needs {}",
            data.len(),
            need.map_or("more".to_string(), |x| x.to_string())
        )));
    }
    if width == 0 {
        // NumPy writes at least `<U1` for empty strings; a zero-width header with elements
        // would have them cost nothing in the file.
        if n > 0 {
            return Err(bad(&format!("element type '{descr}' has zero width")));
        }
        return Ok(Some(Tensor::from_strings(shape.to_vec(), &[])));
    }
    let mut strings = Vec::with_capacity(n);
    for e in data.chunks(width * unit).take(n) {
        let text: Vec<u8> = if unit == 1 {
            e.to_vec()
        } else {
            let mut s = String::new();
            for c in e.chunks(4) {
                let c = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                s.push(char::from_u32(c).ok_or_else(|| {
                    bad(&format!(
                        "element {} holds U+{c:X}, not a character",
                        strings.len()
                    ))
                })?);
            }
            s.into_bytes()
        };
        let end = text.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        if text[..end].contains(&0) {
            return Err(bad(&format!(
                "element {} contains a NUL character, which ONNX strings cannot hold",
                strings.len()
            )));
        }
        strings.push(text[..end].to_vec());
    }
    Ok(Some(Tensor::from_strings(shape.to_vec(), &strings)))
}

#[cfg(test)]
mod tests {
    use super::read_npy;

    /// A version 1.0 `.npy` file of `descr` and `shape` holding `data`.
    fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while (10 + h.len() + 1) % 64 != 0 {
            h.push(' ');
        }
        h.push('\n');
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        v.extend((h.len() as u16).to_le_bytes());
        v.extend(h.as_bytes());
        v.extend(data);
        v
    }

    #[test]
    fn unicode_and_byte_strings() {
        // np.array(["ab", "é", ""]): <U2, NUL-padded UTF-32.
        let mut d = Vec::new();
        for s in ["ab", "é", ""] {
            let mut cs: Vec<u32> = s.chars().map(|c| c as u32).collect();
            cs.resize(2, 0);
            d.extend(cs.iter().flat_map(|c| c.to_le_bytes()));
        }
        let t = read_npy(&npy("<U2", "(3,)", &d), "x").unwrap();
        assert_eq!(t.shape, vec![3]);
        assert_eq!(
            t.to_strings(),
            vec![b"ab".to_vec(), "é".as_bytes().to_vec(), vec![]]
        );
        let t = read_npy(&npy("|S3", "(1, 2)", b"ab\0xyz"), "x").unwrap();
        assert_eq!(t.shape, vec![1, 2]);
        assert_eq!(t.to_strings(), vec![b"ab".to_vec(), b"xyz".to_vec()]);
    }

    #[test]
    fn bad_string_arrays_are_errors() {
        let e = |f: Vec<u8>| read_npy(&f, "x").unwrap_err().to_string();
        assert!(e(npy("<U1", "(2,)", &[0; 4])).contains("needs 8"));
        assert!(e(npy("|S3", "(1,)", b"a\0b")).contains("NUL"));
        assert!(e(npy("<U1", "(1,)", &0xD800u32.to_le_bytes())).contains("not a character"));
        assert!(e(npy("|O", "(1,)", &[0; 8])).contains("dtype=str"));
        // Zero-width elements: an error, not a panic (nor 2^32 strings from an empty file).
        assert!(e(npy("<U0", "(65536, 65536)", &[])).contains("zero width"));
        assert_eq!(
            read_npy(&npy("<U0", "(0,)", &[]), "x").unwrap().shape,
            vec![0]
        );
    }

    /// A header may claim any dims: negative ones, and products past 64 bits, are errors
    /// (they panicked on overflow).
    #[test]
    fn hostile_shapes_are_errors() {
        let e = |shape: &str| {
            read_npy(&npy("<f4", shape, &[]), "x")
                .unwrap_err()
                .to_string()
        };
        assert!(e("(-4,)").contains("bad shape"));
        assert!(e("(4294967296, 4294967296)").contains("longer than"));
        assert!(e("(9223372036854775807, 2)").contains("longer than"));
        assert!(e("(99999999999999999999999,)").contains("bad shape"));
        assert!(e("(65536, 65536, 65536)").contains("elements"));
        assert!(e("(3, 2)").contains("needs 24"));
    }
}
