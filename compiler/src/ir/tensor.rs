//! Constant tensors (initializers, folded values) and typed scalars.
//!
//! Data is stored as raw little-endian bytes in the element type's storage layout,
//! shared behind an `Arc` so that graph rewrites never copy weights.

use super::dtype::DType;
use half::{bf16, f16};
use std::sync::Arc;

/// A typed scalar value. Floats are held as f64, signed integers as i64, unsigned as u64.
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    F(f64),
    I(i64),
    U(u64),
    B(bool),
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Scalar::F(a), Scalar::F(b)) => a.to_bits() == b.to_bits(),
            (Scalar::I(a), Scalar::I(b)) => a == b,
            (Scalar::U(a), Scalar::U(b)) => a == b,
            (Scalar::B(a), Scalar::B(b)) => a == b,
            _ => false,
        }
    }
}
impl Eq for Scalar {}
impl std::hash::Hash for Scalar {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Scalar::F(v) => (0u8, v.to_bits()).hash(state),
            Scalar::I(v) => (1u8, *v).hash(state),
            Scalar::U(v) => (2u8, *v).hash(state),
            Scalar::B(v) => (3u8, *v).hash(state),
        }
    }
}

impl Scalar {
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::F(v) => v,
            Scalar::I(v) => v as f64,
            Scalar::U(v) => v as f64,
            Scalar::B(v) => v as u8 as f64,
        }
    }
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::F(v) => v as i64,
            Scalar::I(v) => v,
            Scalar::U(v) => v as i64,
            Scalar::B(v) => v as i64,
        }
    }
    pub fn as_u64(self) -> u64 {
        match self {
            Scalar::F(v) => v as u64,
            Scalar::I(v) => v as u64,
            Scalar::U(v) => v,
            Scalar::B(v) => v as u64,
        }
    }
    pub fn as_bool(self) -> bool {
        match self {
            Scalar::F(v) => v != 0.0,
            Scalar::I(v) => v != 0,
            Scalar::U(v) => v != 0,
            Scalar::B(v) => v,
        }
    }

    /// Converts to the canonical representation of `dt` with ONNX `Cast` semantics
    /// (float to int truncates toward zero; out-of-range saturates as Rust `as` does).
    pub fn cast(self, dt: DType) -> Scalar {
        match dt {
            DType::F32 => Scalar::F(self.as_f64() as f32 as f64),
            DType::F16 => Scalar::F(f16::from_f64(self.as_f64()).to_f64()),
            DType::BF16 => Scalar::F(bf16::from_f64(self.as_f64()).to_f64()),
            DType::F64 => Scalar::F(self.as_f64()),
            DType::Bool => Scalar::B(self.as_bool()),
            DType::I8 => Scalar::I(self.wrap_signed(8)),
            DType::I16 => Scalar::I(self.wrap_signed(16)),
            DType::I32 => Scalar::I(self.wrap_signed(32)),
            DType::I64 => Scalar::I(self.wrap_signed(64)),
            DType::U8 => Scalar::U(self.wrap_unsigned(8)),
            DType::U16 => Scalar::U(self.wrap_unsigned(16)),
            DType::U32 => Scalar::U(self.wrap_unsigned(32)),
            // A string element is its pointer bits (values the generated code moves).
            DType::U64 | DType::Str => Scalar::U(self.wrap_unsigned(64)),
            DType::I4 => Scalar::I(self.wrap_signed(4)),
            DType::I2 => Scalar::I(self.wrap_signed(2)),
            DType::U4 => Scalar::U(self.wrap_unsigned(4)),
            DType::U2 => Scalar::U(self.wrap_unsigned(2)),
            // Rounded, not saturating (`onnxc_runtime::lowp::round`).
            DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::F4E2M1 => Scalar::F(onnxc_runtime::lowp::round(
                dt.onnx_code() as u32,
                self.as_f64() as f32,
            ) as f64),
        }
    }

    fn wrap_signed(self, bits: u32) -> i64 {
        let v: i64 = match self {
            Scalar::F(v) => v as i64,
            Scalar::I(v) => v,
            Scalar::U(v) => v as i64,
            Scalar::B(v) => v as i64,
        };
        if bits == 64 {
            v
        } else {
            (v << (64 - bits)) >> (64 - bits)
        }
    }

    fn wrap_unsigned(self, bits: u32) -> u64 {
        let v: u64 = match self {
            Scalar::F(v) => {
                if v < 0.0 {
                    v as i64 as u64
                } else {
                    v as u64
                }
            }
            Scalar::I(v) => v as u64,
            Scalar::U(v) => v,
            Scalar::B(v) => v as u64,
        };
        if bits == 64 {
            v
        } else {
            v & ((1u64 << bits) - 1)
        }
    }

    pub fn zero(dt: DType) -> Scalar {
        Scalar::I(0).cast(dt)
    }
    pub fn one(dt: DType) -> Scalar {
        Scalar::I(1).cast(dt)
    }

    /// Writes the value in `dt`'s storage layout.
    pub fn write(self, dt: DType, out: &mut Vec<u8>) {
        let v = self.cast(dt);
        Scalar::write_exact(dt, v, out)
    }

    /// Writes `v` (already of `dt`'s values) in `dt`'s storage layout; low-precision floats
    /// are encoded without saturating, so an infinity stays one where the format has it.
    fn write_exact(dt: DType, v: Scalar, out: &mut Vec<u8>) {
        match dt {
            DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::F4E2M1 => out.push(onnxc_runtime::lowp::encode(
                dt.onnx_code() as u32,
                v.as_f64() as f32,
            )),
            DType::I4 | DType::I2 => out.push(v.as_i64() as i8 as u8),
            DType::U4 | DType::U2 => out.push(v.as_u64() as u8),
            DType::F32 => out.extend_from_slice(&(v.as_f64() as f32).to_le_bytes()),
            DType::F64 => out.extend_from_slice(&v.as_f64().to_le_bytes()),
            DType::F16 => out.extend_from_slice(&f16::from_f64(v.as_f64()).to_bits().to_le_bytes()),
            DType::BF16 => {
                out.extend_from_slice(&bf16::from_f64(v.as_f64()).to_bits().to_le_bytes())
            }
            DType::Bool => out.push(v.as_bool() as u8),
            DType::I8 => out.push(v.as_i64() as i8 as u8),
            DType::U8 => out.push(v.as_u64() as u8),
            DType::I16 => out.extend_from_slice(&(v.as_i64() as i16).to_le_bytes()),
            DType::U16 => out.extend_from_slice(&(v.as_u64() as u16).to_le_bytes()),
            DType::I32 => out.extend_from_slice(&(v.as_i64() as i32).to_le_bytes()),
            DType::U32 => out.extend_from_slice(&(v.as_u64() as u32).to_le_bytes()),
            DType::I64 => out.extend_from_slice(&v.as_i64().to_le_bytes()),
            DType::U64 | DType::Str => out.extend_from_slice(&v.as_u64().to_le_bytes()),
        }
    }

    /// Reads one element of type `dt` from `bytes` (which holds at least `dt.size()` bytes).
    pub fn read(dt: DType, bytes: &[u8]) -> Scalar {
        let b = |n: usize| -> [u8; 8] {
            let mut a = [0u8; 8];
            a[..n].copy_from_slice(&bytes[..n]);
            a
        };
        match dt {
            DType::F32 => {
                Scalar::F(f32::from_le_bytes(b(4)[..4].try_into().unwrap_or([0; 4])) as f64)
            }
            DType::F64 => Scalar::F(f64::from_le_bytes(b(8))),
            DType::F16 => {
                Scalar::F(f16::from_bits(u16::from_le_bytes([bytes[0], bytes[1]])).to_f64())
            }
            DType::BF16 => {
                Scalar::F(bf16::from_bits(u16::from_le_bytes([bytes[0], bytes[1]])).to_f64())
            }
            DType::Bool => Scalar::B(bytes[0] != 0),
            DType::I8 => Scalar::I(bytes[0] as i8 as i64),
            DType::U8 => Scalar::U(bytes[0] as u64),
            DType::I16 => Scalar::I(i16::from_le_bytes([bytes[0], bytes[1]]) as i64),
            DType::U16 => Scalar::U(u16::from_le_bytes([bytes[0], bytes[1]]) as u64),
            DType::I32 => {
                Scalar::I(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as i64)
            }
            DType::U32 => {
                Scalar::U(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as u64)
            }
            DType::I64 => Scalar::I(i64::from_le_bytes(b(8))),
            DType::U64 | DType::Str => Scalar::U(u64::from_le_bytes(b(8))),
            DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::F4E2M1 => {
                Scalar::F(onnxc_runtime::lowp::decode(dt.onnx_code() as u32, bytes[0]) as f64)
            }
            DType::I4 | DType::I2 => Scalar::I(bytes[0] as i8 as i64),
            DType::U4 | DType::U2 => Scalar::U(bytes[0] as u64),
        }
    }
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::F(v) => write!(f, "{v:?}"),
            Scalar::I(v) => write!(f, "{v}"),
            Scalar::U(v) => write!(f, "{v}u"),
            Scalar::B(v) => write!(f, "{v}"),
        }
    }
}

/// An ONNX value as test data files and the driver carry one: a tensor, a sequence of
/// tensors, or an optional (empty, or holding a tensor or a sequence).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Tensor(Tensor),
    Sequence { elem: DType, items: Vec<Tensor> },
    Optional(Option<Box<Value>>),
}

impl Value {
    /// What an optional holds (itself for any other value); `None` for an empty optional.
    pub fn content(&self) -> Option<&Value> {
        match self {
            Value::Optional(inner) => inner.as_deref().and_then(Value::content),
            v => Some(v),
        }
    }
}

/// A constant tensor with known shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub data: Arc<Vec<u8>>,
}

impl Tensor {
    pub fn new(dtype: DType, shape: Vec<i64>, data: Vec<u8>) -> Tensor {
        debug_assert_eq!(
            data.len(),
            shape.iter().product::<i64>() as usize * dtype.size()
        );
        Tensor {
            dtype,
            shape,
            data: Arc::new(data),
        }
    }

    /// The bytes the ABI passes for this tensor: its data, packed for the 4- and 2-bit types.
    pub fn abi_bytes(&self) -> Vec<u8> {
        self.dtype.pack(&self.data)
    }

    /// A string tensor as the host side holds one (inputs and outputs of `onnxc run`, test
    /// data): `data` is every element's bytes followed by a NUL, in order — not pointers.
    /// Such a tensor never becomes a graph constant.
    pub fn from_strings(shape: Vec<i64>, strings: &[Vec<u8>]) -> Tensor {
        let mut data = Vec::new();
        for s in strings {
            data.extend(s.iter().copied().take_while(|&b| b != 0));
            data.push(0);
        }
        Tensor {
            dtype: DType::Str,
            shape,
            data: Arc::new(data),
        }
    }

    /// The elements of a string tensor made by `from_strings`.
    pub fn to_strings(&self) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = self.data.split(|&b| b == 0).map(|s| s.to_vec()).collect();
        v.truncate(self.len());
        v
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product::<i64>() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn scalar(dtype: DType, v: Scalar) -> Tensor {
        let mut data = Vec::with_capacity(dtype.size());
        v.write(dtype, &mut data);
        Tensor::new(dtype, vec![], data)
    }

    pub fn filled(dtype: DType, shape: Vec<i64>, v: Scalar) -> Tensor {
        let n: i64 = shape.iter().product();
        let mut one = Vec::with_capacity(dtype.size());
        v.write(dtype, &mut one);
        let data = one.repeat(n as usize);
        Tensor::new(dtype, shape, data)
    }

    pub fn from_i64s(shape: Vec<i64>, vals: &[i64]) -> Tensor {
        let mut data = Vec::with_capacity(vals.len() * 8);
        for v in vals {
            data.extend_from_slice(&v.to_le_bytes());
        }
        Tensor::new(DType::I64, shape, data)
    }

    pub fn from_scalars(dtype: DType, shape: Vec<i64>, vals: &[Scalar]) -> Tensor {
        let mut data = Vec::with_capacity(vals.len() * dtype.size());
        for v in vals {
            v.write(dtype, &mut data);
        }
        Tensor::new(dtype, shape, data)
    }

    pub fn get(&self, i: usize) -> Scalar {
        let s = self.dtype.size();
        Scalar::read(self.dtype, &self.data[i * s..(i + 1) * s])
    }

    pub fn scalars(&self) -> Vec<Scalar> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }

    pub fn to_i64s(&self) -> Vec<i64> {
        (0..self.len()).map(|i| self.get(i).as_i64()).collect()
    }

    pub fn to_f64s(&self) -> Vec<f64> {
        (0..self.len()).map(|i| self.get(i).as_f64()).collect()
    }

    /// True if every element has the same bit pattern (a splat).
    pub fn splat_value(&self) -> Option<Scalar> {
        let s = self.dtype.size();
        let first = self.data.get(..s)?;
        self.data
            .chunks_exact(s)
            .all(|c| c == first)
            .then(|| self.get(0))
    }
}
