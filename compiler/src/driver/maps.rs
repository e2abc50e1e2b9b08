//! Map inputs' test data: an ONNX `MapProto` file (onnx-data.proto; what
//! `onnx.numpy_helper.from_dict` makes) read into the bytes the program driver takes for a
//! map input (`onnxc_runtime::driver`'s module doc): the entry count (u64), the keys, then
//! the values, numbers little-endian and strings NUL-terminated.

use crate::error::{Error, Result};
use crate::frontend::tensor::{DataDir, tensor_from_proto};
use crate::ir::{DType, Tensor};
use onnxc_proto::MapProto;
use std::path::Path;

/// The driver bytes of the map in `path`, checked against the input's key and value types.
pub fn read_map(path: &Path, key: DType, value: DType) -> Result<Tensor> {
    use prost::Message;
    let what = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let m = MapProto::decode(bytes.as_slice())
        .map_err(|e| Error::Usage(format!("{what}: not an ONNX MapProto: {e}")))?;
    let bad = |msg: String| Error::Usage(format!("{what}: {msg}"));
    let key_type = m.key_type.unwrap_or(0);
    let mut out = Vec::new();
    let n = match key {
        DType::Str if key_type == 8 => {
            out.extend((m.string_keys.len() as u64).to_le_bytes());
            for k in &m.string_keys {
                if k.contains(&0) {
                    return Err(bad("a key holds a NUL byte".into()));
                }
                out.extend(k);
                out.push(0);
            }
            m.string_keys.len()
        }
        DType::I64 if key_type == 7 => {
            out.extend((m.keys.len() as u64).to_le_bytes());
            for k in &m.keys {
                out.extend(k.to_le_bytes());
            }
            m.keys.len()
        }
        _ => {
            return Err(bad(format!(
                "the map's keys are {}, the input's are {key}",
                DType::onnx_code_name(key_type)
            )));
        }
    };
    // The values: one tensor per entry (from_dict's form), or one tensor of n elements.
    let tensors = m.values.map(|s| s.tensor_values).unwrap_or_default();
    let mut values: Vec<Tensor> = Vec::with_capacity(tensors.len());
    for t in &tensors {
        values.push(tensor_from_proto(t, &DataDir::default(), &what)?);
    }
    if values.iter().any(|t| t.dtype != value) {
        return Err(bad(format!("the map's values are not {value}")));
    }
    let count: usize = values.iter().map(Tensor::len).sum();
    if count != n {
        return Err(bad(format!("{n} keys but {count} values")));
    }
    for t in &values {
        if value == DType::Str {
            for s in t.to_strings() {
                out.extend(s);
                out.push(0);
            }
        } else {
            out.extend(t.data.iter());
        }
    }
    let len = out.len() as i64;
    Ok(Tensor::new(DType::U8, vec![len], out))
}
