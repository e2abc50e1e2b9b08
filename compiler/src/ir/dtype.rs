//! Element types: the ONNX `TensorProto.DataType` codes and what the compiler knows about each.
//!
//! Storage is one element per `size()` bytes, little-endian, row-major. Sub-byte ONNX types
//! (int4, uint4, float4) are not storable here yet; the frontend reports them as unsupported.

use std::fmt;

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
}

impl DType {
    pub const ALL: [DType; 14] = [
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
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 | DType::Str => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
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
        )
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    pub fn is_unsigned_int(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    /// Numeric: everything but bool and string.
    pub fn is_numeric(self) -> bool {
        !matches!(self, DType::Bool | DType::Str)
    }

    /// Half-precision types are stored narrow and computed in f32.
    pub fn compute_type(self) -> DType {
        match self {
            DType::F16 | DType::BF16 => DType::F32,
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
        }
    }

    pub fn from_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|t| t.name() == s)
    }

    /// The C type used in generated headers.
    pub fn c_type(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::U8 | DType::Bool => "uint8_t",
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
