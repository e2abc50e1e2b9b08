//! Element types: the ONNX `TensorProto.DataType` codes and what the compiler knows about each.
//!
//! Storage is one element per `size()` bytes, little-endian, row-major. The low-precision
//! types (float8, float4, int4/uint4, int2/uint2) take one byte per element inside a model
//! (the 4- and 2-bit ones hold their code, integers sign-extended); at the ABI and in
//! `TensorProto`s the sub-byte ones are packed (`packed_bits`, `pack`, `unpack`).

use std::fmt;

/// The last `TensorProto.DataType` code (INT2, onnx 1.19); codes 1 to it are data types.
pub const LAST_ONNX_CODE: i32 = 26;

#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum DType {
    F32,
    U8,
    I8,
    U16,
    I16,
    I32,
    I64,
    Bool,
    F16,
    F64,
    U32,
    U64,
    BF16,
    /// A string: at run time a pointer to NUL-terminated UTF-8 (`const char *`). Strings
    /// only move (loads, stores, selects) and go through the string kernels
    /// (`kernels::StrLookup`, `kernels::StrTable`); no arithmetic or comparison reads them.
    Str,
    /// float8 E4M3FN, computed in f32 (`onnxc_runtime::lowp`).
    F8E4M3FN,
    F8E4M3FNUZ,
    F8E5M2,
    F8E5M2FNUZ,
    /// float8 E8M0: an unsigned power of two (MX scales).
    F8E8M0,
    /// float4 E2M1: the 4-bit code in one byte, computed in f32.
    F4E2M1,
    /// 4-bit integers: one sign-extended (or zero-extended) value per byte.
    I4,
    U4,
    /// 2-bit integers, likewise.
    I2,
    U2,
}

impl DType {
    pub const ALL: [DType; 24] = [
        DType::F32,
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::Bool,
        DType::F16,
        DType::F64,
        DType::U32,
        DType::U64,
        DType::BF16,
        DType::Str,
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::F8E8M0,
        DType::F4E2M1,
        DType::I4,
        DType::U4,
        DType::I2,
        DType::U2,
    ];

    /// From an ONNX `TensorProto.DataType` code; `None` for codes this compiler cannot store.
    pub fn from_onnx(code: i32) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            4 => DType::U16,
            5 => DType::I16,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            12 => DType::U32,
            13 => DType::U64,
            16 => DType::BF16,
            8 => DType::Str,
            17 => DType::F8E4M3FN,
            18 => DType::F8E4M3FNUZ,
            19 => DType::F8E5M2,
            20 => DType::F8E5M2FNUZ,
            21 => DType::U4,
            22 => DType::I4,
            23 => DType::F4E2M1,
            24 => DType::F8E8M0,
            25 => DType::U2,
            26 => DType::I2,
            _ => return None,
        })
    }

    pub fn onnx_code(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::BF16 => 16,
            DType::Str => 8,
            DType::F8E4M3FN => 17,
            DType::F8E4M3FNUZ => 18,
            DType::F8E5M2 => 19,
            DType::F8E5M2FNUZ => 20,
            DType::U4 => 21,
            DType::I4 => 22,
            DType::F4E2M1 => 23,
            DType::F8E8M0 => 24,
            DType::U2 => 25,
            DType::I2 => 26,
        }
    }

    /// Name of an ONNX data type code, for error messages (including codes we cannot store).
    pub fn onnx_code_name(code: i32) -> &'static str {
        match code {
            0 => "UNDEFINED",
            1 => "FLOAT",
            2 => "UINT8",
            3 => "INT8",
            4 => "UINT16",
            5 => "INT16",
            6 => "INT32",
            7 => "INT64",
            8 => "STRING",
            9 => "BOOL",
            10 => "FLOAT16",
            11 => "DOUBLE",
            12 => "UINT32",
            13 => "UINT64",
            14 => "COMPLEX64",
            15 => "COMPLEX128",
            16 => "BFLOAT16",
            17 => "FLOAT8E4M3FN",
            18 => "FLOAT8E4M3FNUZ",
            19 => "FLOAT8E5M2",
            20 => "FLOAT8E5M2FNUZ",
            21 => "UINT4",
            22 => "INT4",
            23 => "FLOAT4E2M1",
            24 => "FLOAT8E8M0",
            25 => "UINT2",
            26 => "INT2",
            _ => "unknown",
        }
    }

    pub fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::F4E2M1
            | DType::I4
            | DType::U4
            | DType::I2
            | DType::U2 => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 | DType::Str => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16) || self.is_lowp_float()
    }

    /// float8 and float4: one byte per element, computed in f32, converted by
    /// `onnxc_runtime::lowp` (whose format code is the ONNX type code).
    pub fn is_lowp_float(self) -> bool {
        matches!(
            self,
            DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1
        )
    }

    /// Bits per element at the ABI and in `TensorProto` data, for the types packed there
    /// (int4, uint4, float4: two per byte; int2, uint2: four), low bits first.
    pub fn packed_bits(self) -> Option<u32> {
        match self {
            DType::I4 | DType::U4 | DType::F4E2M1 => Some(4),
            DType::I2 | DType::U2 => Some(2),
            _ => None,
        }
    }

    /// Bits per element at the ABI: `packed_bits` for the sub-byte types, else `8 · size`.
    pub fn bits(self) -> u32 {
        self.packed_bits().unwrap_or(8 * self.size() as u32)
    }

    /// Bytes `n` elements take at the ABI (packed for the sub-byte types).
    pub fn abi_bytes(self, n: i64) -> i64 {
        (n * self.bits() as i64 + 7) / 8
    }

    /// Stored in fewer bits than it is computed in: a value computed in the compute type is
    /// rounded (floats) or wrapped (int4, int2) when stored.
    pub fn is_narrow(self) -> bool {
        self.compute_type() != self || matches!(self, DType::I4 | DType::U4 | DType::I2 | DType::U2)
    }

    /// The range of an integer type of fewer than 64 bits.
    pub fn int_range(self) -> Option<(i64, i64)> {
        Some(match self {
            DType::I2 => (-2, 1),
            DType::U2 => (0, 3),
            DType::I4 => (-8, 7),
            DType::U4 => (0, 15),
            DType::I8 => (i8::MIN as i64, i8::MAX as i64),
            DType::U8 => (0, u8::MAX as i64),
            DType::I16 => (i16::MIN as i64, i16::MAX as i64),
            DType::U16 => (0, u16::MAX as i64),
            DType::I32 => (i32::MIN as i64, i32::MAX as i64),
            DType::U32 => (0, u32::MAX as i64),
            _ => return None,
        })
    }

    /// Packs one-byte-per-element data of a sub-byte type (`packed_bits`) into its ABI bytes
    /// (`onnxc_runtime::subbyte`). Other types are returned as they are.
    pub fn pack(self, data: &[u8]) -> Vec<u8> {
        let Some(b) = self.packed_bits() else {
            return data.to_vec();
        };
        let mut out = vec![0u8; self.abi_bytes(data.len() as i64) as usize];
        onnxc_runtime::subbyte::pack_bits(data, &mut out, b);
        out
    }

    /// The inverse of `pack`: `n` elements, one per byte (signed types sign-extended).
    /// `None` when `data` is not exactly `abi_bytes(n)` long.
    pub fn unpack(self, data: &[u8], n: usize) -> Option<Vec<u8>> {
        if data.len() as i64 != self.abi_bytes(n as i64) {
            return None;
        }
        let Some(b) = self.packed_bits() else {
            return Some(data.to_vec());
        };
        let mut out = vec![0u8; n];
        onnxc_runtime::subbyte::unpack_bits(data, &mut out, b, self.is_signed_int());
        Some(out)
    }

    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::U8
                | DType::I8
                | DType::U16
                | DType::I16
                | DType::I32
                | DType::I64
                | DType::U32
                | DType::U64
                | DType::I4
                | DType::U4
                | DType::I2
                | DType::U2
        )
    }

    pub fn is_signed_int(self) -> bool {
        matches!(
            self,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::I4 | DType::I2
        )
    }

    pub fn is_unsigned_int(self) -> bool {
        matches!(
            self,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::U4 | DType::U2
        )
    }

    /// Numeric: everything but bool and string.
    pub fn is_numeric(self) -> bool {
        !matches!(self, DType::Bool | DType::Str)
    }

    /// Half-precision and low-precision floats are stored narrow and computed in f32; 4- and
    /// 2-bit integers are computed in 8 bits.
    pub fn compute_type(self) -> DType {
        match self {
            DType::F16 | DType::BF16 => DType::F32,
            t if t.is_lowp_float() => DType::F32,
            DType::I4 | DType::I2 => DType::I8,
            DType::U4 | DType::U2 => DType::U8,
            t => t,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::U16 => "uint16",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::Bool => "bool",
            DType::F16 => "float16",
            DType::F64 => "float64",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::BF16 => "bfloat16",
            DType::Str => "string",
            DType::F8E4M3FN => "float8e4m3fn",
            DType::F8E4M3FNUZ => "float8e4m3fnuz",
            DType::F8E5M2 => "float8e5m2",
            DType::F8E5M2FNUZ => "float8e5m2fnuz",
            DType::F8E8M0 => "float8e8m0",
            DType::F4E2M1 => "float4e2m1",
            DType::I4 => "int4",
            DType::U4 => "uint4",
            DType::I2 => "int2",
            DType::U2 => "uint2",
        }
    }

    pub fn from_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|t| t.name() == s)
    }

    /// The C type used in generated headers (the low-precision types: their bytes, packed
    /// for the sub-byte ones).
    pub fn c_type(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::U8 | DType::Bool => "uint8_t",
            DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::F4E2M1
            | DType::I4
            | DType::U4
            | DType::I2
            | DType::U2 => "uint8_t",
            DType::I8 => "int8_t",
            DType::U16 | DType::F16 | DType::BF16 => "uint16_t",
            DType::I16 => "int16_t",
            DType::I32 => "int32_t",
            DType::I64 => "int64_t",
            DType::F64 => "double",
            DType::U32 => "uint32_t",
            DType::U64 => "uint64_t",
            DType::Str => "const char *",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
