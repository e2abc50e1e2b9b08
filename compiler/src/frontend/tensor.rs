//! `TensorProto` → `Tensor`, including external data stored in files next to the model.

use crate::error::{Error, Result};
use crate::ir::{DType, Scalar, Tensor, Value};
use onnxc_proto::TensorProto;
use std::path::{Component, Path, PathBuf};

/// Where external-data files are looked up: the model's directory.
///
/// A location is read only if its real path (symbolic links followed) is a regular file inside
/// the real path of `dir`, or inside the directory the model file really is in (`model`
/// followed): the Hugging Face cache links both the model and its data into one `blobs/`
/// directory, as onnxruntime allows.
#[derive(Clone, Debug, Default)]
pub struct DataDir {
    /// The model's directory as its path names it (`None`: not loaded from a file).
    pub dir: Option<PathBuf>,
    /// The model file, when it was loaded from one.
    pub model: Option<PathBuf>,
}

impl DataDir {
    /// The directory `dir`, holding no model file of its own (test data).
    pub fn new(dir: PathBuf) -> DataDir {
        DataDir {
            dir: Some(dir),
            model: None,
        }
    }

    /// The directory of the model file at `path`.
    pub fn of_model(path: &Path) -> DataDir {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        DataDir {
            dir: Some(dir),
            model: Some(path.to_path_buf()),
        }
    }

    /// Whether the real path `real` lies inside one of the directories external data may
    /// come from.
    fn contains(&self, real: &Path) -> bool {
        let named = self
            .dir
            .as_deref()
            .and_then(|d| std::fs::canonicalize(d).ok());
        let linked = (self.model.as_deref())
            .and_then(|m| std::fs::canonicalize(m).ok())
            .and_then(|m| m.parent().map(Path::to_path_buf));
        [named, linked]
            .into_iter()
            .flatten()
            .any(|d| real.starts_with(d))
    }
}

/// What a file that is not a regular one is, for messages.
fn file_kind(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_block_device() || t.is_char_device() {
            return "a device";
        }
    }
    "not a regular file"
}

pub fn tensor_from_proto(t: &TensorProto, dir: &DataDir, what: &str) -> Result<Tensor> {
    tensor_from_proto_with(t, None, dir, what)
}

/// `tensor_from_proto` with the raw bytes supplied by the caller (moved out of `t`) instead of
/// copied from `t.raw_data`.
pub fn tensor_from_proto_with(
    t: &TensorProto,
    raw: Option<Vec<u8>>,
    dir: &DataDir,
    what: &str,
) -> Result<Tensor> {
    let code = t.data_type.unwrap_or(0);
    let dtype = DType::from_onnx(code).ok_or_else(|| {
        Error::Model(format!(
            "{what}: element type {} is not supported by onnxc (supported: {})",
            DType::onnx_code_name(code),
            DType::ALL
                .iter()
                .map(|d| d.name())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    if let Some(d) = t.dims.iter().find(|&&d| d < 0) {
        return Err(Error::Model(format!(
            "{what}: negative dimension {d} in {:?}",
            t.dims
        )));
    }
    crate::ir::dim::check_size(&t.dims).map_err(|m| Error::Model(format!("{what}: {m}")))?;
    let n = t.dims.iter().product::<i64>() as usize;
    let shape = t.dims.clone();
    if dtype == DType::Str {
        if t.string_data.len() != n {
            return Err(Error::Model(format!(
                "{what}: holds {} strings but dims {:?} need {n}",
                t.string_data.len(),
                t.dims
            )));
        }
        if t.string_data.iter().any(|s| s.contains(&0)) {
            return Err(Error::Model(format!(
                "{what}: a string holds a NUL byte, which a C string cannot"
            )));
        }
        return Ok(Tensor::from_strings(shape, &t.string_data));
    }
    let size = dtype.size();
    // Bytes the data takes in the proto: packed for the sub-byte types.
    let stored = dtype.abi_bytes(n as i64) as usize;
    let is_external = t.data_location == Some(1);
    let bytes: Vec<u8> = if is_external {
        read_external(t, dir, what, stored)?
    } else if let Some(raw) = raw {
        raw
    } else if let Some(raw) = &t.raw_data {
        raw.clone()
    } else {
        // Sized by the values present, not by the dims (which may claim far more).
        let present = match dtype {
            DType::F32 => t.float_data.len(),
            DType::F64 => t.double_data.len(),
            DType::I64 => t.int64_data.len(),
            DType::U32 | DType::U64 => t.uint64_data.len(),
            _ => t.int32_data.len(),
        };
        let mut out = Vec::with_capacity(present * size);
        match dtype {
            DType::F32 => t
                .float_data
                .iter()
                .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
            DType::F64 => t
                .double_data
                .iter()
                .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
            DType::I64 => t
                .int64_data
                .iter()
                .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
            DType::U32 => t
                .uint64_data
                .iter()
                .for_each(|v| out.extend_from_slice(&(*v as u32).to_le_bytes())),
            DType::U64 => t
                .uint64_data
                .iter()
                .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
            DType::F16 | DType::BF16 | DType::U16 | DType::I16 => t
                .int32_data
                .iter()
                .for_each(|v| out.extend_from_slice(&(*v as u16).to_le_bytes())),
            DType::I32 => t
                .int32_data
                .iter()
                .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
            // The low-precision types keep one code per int32, the sub-byte ones one
            // packed byte.
            DType::I8
            | DType::U8
            | DType::Bool
            | DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::F4E2M1
            | DType::I4
            | DType::U4
            | DType::I2
            | DType::U2 => t.int32_data.iter().for_each(|v| out.push(*v as u8)),
            DType::Str => unreachable!("string tensors return above"),
        }
        out
    };
    if bytes.len() != stored {
        return Err(Error::Model(format!(
            "{what}: holds {} bytes of data but dims {:?} of {} need {stored}",
            bytes.len(),
            t.dims,
            dtype,
        )));
    }
    let mut bytes = dtype
        .unpack(&bytes, n)
        .ok_or_else(|| Error::Internal(format!("{what}: unpacking {stored} bytes of {dtype}")))?;
    if dtype == DType::Bool {
        // Normalize to 0/1 so generated code may rely on it.
        bytes.iter_mut().for_each(|b| *b = (*b != 0) as u8);
    }
    Ok(Tensor::new(dtype, shape, bytes))
}

/// The `expect` bytes of an external tensor's data (a range of another length is an error,
/// reported before anything is read).
fn read_external(t: &TensorProto, dir: &DataDir, what: &str, expect: usize) -> Result<Vec<u8>> {
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for kv in &t.external_data {
        let v = kv.value.clone().unwrap_or_default();
        match kv.key.as_deref() {
            Some("location") => location = Some(v),
            Some("offset") => {
                offset = v.parse().map_err(|_| {
                    Error::Model(format!(
                        "{what}: external data offset '{v}' is not a number"
                    ))
                })?
            }
            Some("length") => {
                length = Some(v.parse::<u64>().map_err(|_| {
                    Error::Model(format!(
                        "{what}: external data length '{v}' is not a number"
                    ))
                })?)
            }
            _ => {}
        }
    }
    let location = location
        .ok_or_else(|| Error::Model(format!("{what}: external data without a 'location'")))?;
    let rel = Path::new(&location);
    if rel.is_absolute() || rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(Error::Model(format!(
            "{what}: external data location '{location}' must be a relative path inside the model's directory"
        )));
    }
    let base = dir.dir.clone().ok_or_else(|| {
        Error::Model(format!("{what}: tensor data is in external file '{location}' but the model was not loaded from a file"))
    })?;
    let path = base.join(rel);
    let cannot = |e: std::io::Error| {
        Error::Model(format!(
            "{what}: cannot read external data file '{}': {e} (it must sit next to the model)",
            path.display()
        ))
    };
    // A symbolic link inside the directory may lead anywhere: the real path must stay inside.
    let real = std::fs::canonicalize(&path).map_err(cannot)?;
    if !dir.contains(&real) {
        return Err(Error::Model(format!(
            "{what}: external data location '{location}' leads to '{}', outside the model's \
             directory (through a symbolic link); the data must be in a file inside the model's \
             directory",
            real.display()
        )));
    }
    // Opening a FIFO would wait for a writer forever, a device could be read without end:
    // only a regular file is opened, and checked again once open.
    let not_regular = |t: std::fs::FileType| {
        Error::Model(format!(
            "{what}: external data location '{location}' is {}, not a regular file; the data \
             must be in a regular file inside the model's directory",
            file_kind(t)
        ))
    };
    let kind = std::fs::metadata(&real).map_err(cannot)?.file_type();
    if !kind.is_file() {
        return Err(not_regular(kind));
    }
    // Only the tensor's range is read: the file may hold every weight of the model.
    let mut file = std::fs::File::open(&real).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    let file_len = meta.len();
    let end = match length {
        Some(l) => offset.checked_add(l),
        None => Some(file_len),
    };
    match end {
        Some(end) if offset <= end && end <= file_len => {
            use std::io::{Read, Seek, SeekFrom};
            if end - offset != expect as u64 {
                return Err(Error::Model(format!(
                    "{what}: external data bytes {offset}..{end} are {} bytes but dims {:?} of \
                     {} need {expect}",
                    end - offset,
                    t.dims,
                    DType::from_onnx(t.data_type.unwrap_or(0)).map_or("?", |d| d.name()),
                )));
            }
            file.seek(SeekFrom::Start(offset)).map_err(cannot)?;
            let mut data = vec![0u8; (end - offset) as usize];
            file.read_exact(&mut data).map_err(cannot)?;
            Ok(data)
        }
        _ => Err(Error::Model(format!(
            "{what}: external data range offset {offset} length {length:?} exceeds file '{}' of {file_len} bytes",
            path.display(),
        ))),
    }
}

/// Serializes a tensor as an ONNX `TensorProto` (raw data), for `onnxc run` outputs.
pub fn tensor_to_proto(t: &Tensor, name: &str) -> TensorProto {
    if t.dtype == DType::Str {
        return TensorProto {
            dims: t.shape.clone(),
            data_type: Some(8),
            name: Some(name.to_string()),
            string_data: t.to_strings(),
            ..Default::default()
        };
    }
    TensorProto {
        dims: t.shape.clone(),
        data_type: Some(t.dtype.onnx_code()),
        name: Some(name.to_string()),
        raw_data: Some(t.abi_bytes()),
        ..Default::default()
    }
}

/// A scalar attribute-tensor value (e.g. `ConstantOfShape.value`) as (dtype, scalar).
pub fn scalar_of(t: &Tensor) -> Option<(DType, Scalar)> {
    (t.len() == 1).then(|| (t.dtype, t.get(0)))
}

/// Decodes a serialized `TensorProto` file (ONNX test data).
pub fn decode_tensor_file(bytes: &[u8], what: &str) -> Result<(String, Tensor)> {
    use prost::Message;
    let t = TensorProto::decode(bytes)
        .map_err(|e| Error::Usage(format!("{what}: not a TensorProto file: {e}")))?;
    let name = t.name.clone().unwrap_or_default();
    Ok((name, tensor_from_proto(&t, &DataDir::default(), what)?))
}

/// Serializes a tensor as a `TensorProto` file.
pub fn encode_tensor_file(t: &Tensor, name: &str) -> Vec<u8> {
    use prost::Message;
    tensor_to_proto(t, name).encode_to_vec()
}

/// Decodes a test data file of a graph input or output declared `optional(...)` and/or a
/// sequence: an `OptionalProto`, a `SequenceProto` of tensors, or a `TensorProto`.
pub fn decode_value_file(
    bytes: &[u8],
    what: &str,
    optional: bool,
    sequence: bool,
) -> Result<(String, Value)> {
    use prost::Message;
    if optional {
        let o = onnxc_proto::OptionalProto::decode(bytes)
            .map_err(|e| Error::Usage(format!("{what}: not an OptionalProto file: {e}")))?;
        let name = o.name.clone().unwrap_or_default();
        let inner = match (o.tensor_value, o.sequence_value) {
            (None, None) if o.map_value.is_some() || o.optional_value.is_some() => {
                return Err(Error::Usage(format!(
                    "{what}: an optional of a map or of an optional; onnxc takes optionals of \
                     tensors and of sequences"
                )));
            }
            (None, None) => None,
            (Some(t), None) if !sequence => Some(Value::Tensor(tensor_from_proto(
                &t,
                &DataDir::default(),
                what,
            )?)),
            (None, Some(s)) if sequence => Some(sequence_value(&s, what)?),
            _ => {
                return Err(Error::Usage(format!(
                    "{what}: the optional holds a {}, the model declares an optional {}",
                    if sequence { "tensor" } else { "sequence" },
                    if sequence { "sequence" } else { "tensor" }
                )));
            }
        };
        return Ok((name, Value::Optional(inner.map(Box::new))));
    }
    if sequence {
        let s = onnxc_proto::SequenceProto::decode(bytes)
            .map_err(|e| Error::Usage(format!("{what}: not a SequenceProto file: {e}")))?;
        return Ok((
            s.name.clone().unwrap_or_default(),
            sequence_value(&s, what)?,
        ));
    }
    let (name, t) = decode_tensor_file(bytes, what)?;
    Ok((name, Value::Tensor(t)))
}

/// A `SequenceProto` of tensors as a `Value`.
fn sequence_value(s: &onnxc_proto::SequenceProto, what: &str) -> Result<Value> {
    if !s.sequence_values.is_empty() || !s.map_values.is_empty() {
        return Err(Error::Usage(format!(
            "{what}: a sequence of sequences or of maps; onnxc takes sequences of tensors"
        )));
    }
    let items = s
        .tensor_values
        .iter()
        .enumerate()
        .map(|(k, t)| tensor_from_proto(t, &DataDir::default(), &format!("{what}[{k}]")))
        .collect::<Result<Vec<Tensor>>>()?;
    let elem = match items.first() {
        Some(t) => t.dtype,
        None => DType::F32,
    };
    if let Some((k, t)) = items.iter().enumerate().find(|(_, t)| t.dtype != elem) {
        return Err(Error::Usage(format!(
            "{what}: element {k} is {}, element 0 {elem}; a sequence's tensors share one type",
            t.dtype
        )));
    }
    Ok(Value::Sequence { elem, items })
}

/// Serializes a value as the file ONNX test data uses for it (`TensorProto`,
/// `SequenceProto` or `OptionalProto`).
pub fn encode_value_file(v: &Value, name: &str) -> Vec<u8> {
    use prost::Message;
    match v {
        Value::Tensor(t) => encode_tensor_file(t, name),
        Value::Sequence { .. } => sequence_proto(v, name).encode_to_vec(),
        Value::Optional(inner) => {
            let mut o = onnxc_proto::OptionalProto {
                name: Some(name.to_string()),
                elem_type: Some(0),
                ..Default::default()
            };
            // A nested optional is written as what it holds (onnxc makes none).
            match inner.as_deref().and_then(Value::content) {
                None | Some(Value::Optional(_)) => {}
                Some(Value::Tensor(t)) => {
                    o.elem_type = Some(1);
                    o.tensor_value = Some(tensor_to_proto(t, ""));
                }
                Some(s @ Value::Sequence { .. }) => {
                    o.elem_type = Some(3);
                    o.sequence_value = Some(sequence_proto(s, ""));
                }
            }
            o.encode_to_vec()
        }
    }
}

/// A ZipMap output as ONNX test data and onnxruntime hold it: a `SequenceProto` of maps,
/// one per row of the `[n, keys]` tensor `t` the ABI returns, each from `keys` to that row's
/// values (a `SequenceProto` of scalar tensors, as `onnx.numpy_helper.from_dict` makes).
pub fn encode_map_sequence_file(
    t: &Tensor,
    keys: &crate::ir::graph::MapKeys,
    name: &str,
) -> Vec<u8> {
    use crate::ir::graph::MapKeys;
    use prost::Message;
    let width = keys.len();
    let size = t.dtype.size();
    let rows = t.len().checked_div(width).unwrap_or(0);
    let map_values = (0..rows)
        .map(|r| {
            let tensor_values = (0..width)
                .map(|c| {
                    let at = (r * width + c) * size;
                    let e = Tensor::new(t.dtype, vec![], t.data[at..at + size].to_vec());
                    tensor_to_proto(&e, "")
                })
                .collect();
            let mut m = onnxc_proto::MapProto {
                key_type: Some(keys.onnx_code()),
                values: Some(onnxc_proto::SequenceProto {
                    elem_type: Some(1),
                    tensor_values,
                    ..Default::default()
                }),
                ..Default::default()
            };
            match keys {
                MapKeys::Ints(k) => m.keys = k.clone(),
                MapKeys::Strings(k) => {
                    m.string_keys = k.iter().map(|s| s.as_bytes().to_vec()).collect()
                }
            }
            m
        })
        .collect();
    onnxc_proto::SequenceProto {
        name: Some(name.to_string()),
        // SequenceProto.DataType.MAP
        elem_type: Some(4),
        map_values,
        ..Default::default()
    }
    .encode_to_vec()
}

fn sequence_proto(v: &Value, name: &str) -> onnxc_proto::SequenceProto {
    let items = match v {
        Value::Sequence { items, .. } => items.as_slice(),
        _ => &[],
    };
    onnxc_proto::SequenceProto {
        name: Some(name.to_string()),
        elem_type: Some(1),
        tensor_values: items.iter().map(|t| tensor_to_proto(t, "")).collect(),
        ..Default::default()
    }
}

/// A `SparseTensorProto` made dense: `values` ([NNZ]) at `indices` ([NNZ] linear or
/// [NNZ, rank] coordinates, each checked against `dims`), zero elsewhere. The dense tensor is
/// within the shape limits and takes at most `passes::fold::MAX_FOLD_BYTES`, as constants
/// folding makes do: its size comes from `dims`, which a small file may set to anything.
pub fn sparse_from_proto(
    sp: &onnxc_proto::SparseTensorProto,
    dir: &DataDir,
    what: &str,
) -> Result<Tensor> {
    let err = |m: String| Error::Model(format!("{what}: {m}"));
    let values = sp
        .values
        .as_ref()
        .ok_or_else(|| err("has no values tensor".into()))?;
    let dims = &sp.dims;
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return Err(err(format!("negative dimension {d} in dims {dims:?}")));
    }
    crate::ir::dim::check_size(dims).map_err(err)?;
    let vals = tensor_from_proto(values, dir, &format!("{what}, values"))?;
    if vals.dtype == DType::Str {
        return Err(err(
            "is a sparse tensor of strings; onnxc makes only numeric sparse tensors dense \
             (store it as a dense initializer)"
                .into(),
        ));
    }
    let n = dims.iter().product::<i64>();
    let size = vals.dtype.size();
    let bytes = n as u64 * size as u64;
    let limit = crate::passes::fold::MAX_FOLD_BYTES;
    if bytes > limit {
        return Err(err(format!(
            "its dense form, dims {dims:?} of {}, takes {bytes} bytes, more than the {limit} \
             (256 MiB) onnxc makes from a sparse tensor; store it as a dense initializer",
            vals.dtype
        )));
    }
    if vals.shape.len() != 1 {
        return Err(err(format!(
            "values has shape {:?}; a sparse tensor's values are one-dimensional, [NNZ]",
            vals.shape
        )));
    }
    let nnz = vals.shape[0];
    let (idx, idx_shape) = match &sp.indices {
        Some(t) => {
            let t = tensor_from_proto(t, dir, &format!("{what}, indices"))?;
            if !t.dtype.is_int() {
                return Err(err(format!(
                    "indices are {}; they must be integers (INT64)",
                    t.dtype
                )));
            }
            (t.to_i64s(), t.shape)
        }
        None if nnz == 0 => (Vec::new(), vec![0]),
        None => return Err(err(format!("has {nnz} values but no indices"))),
    };
    let rank = dims.len() as i64;
    let coordinates = match idx_shape[..] {
        [m] if m == nnz => false,
        [m, r] if m == nnz && r == rank => true,
        _ => {
            return Err(err(format!(
                "indices have shape {idx_shape:?}; with {nnz} values and dims {dims:?} they \
                 must be [{nnz}] (linear) or [{nnz}, {rank}] (coordinates)"
            )));
        }
    };
    let mut linear = Vec::with_capacity(nnz as usize);
    for k in 0..nnz as usize {
        let at = if coordinates {
            let c = &idx[k * rank as usize..(k + 1) * rank as usize];
            let mut at = 0i64;
            for (axis, (&i, &d)) in c.iter().zip(dims).enumerate() {
                if !(0..d).contains(&i) {
                    return Err(err(format!(
                        "index {k} is {c:?}: coordinate {i} on axis {axis} is outside 0..{d}"
                    )));
                }
                at = at * d + i;
            }
            at
        } else {
            let i = idx[k];
            if !(0..n).contains(&i) {
                return Err(err(format!(
                    "index {k} is {i}, outside 0..{n} (the {n} elements of dims {dims:?})"
                )));
            }
            i
        };
        linear.push(at);
    }
    let mut sorted = linear.clone();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(err(format!(
            "element {} (linear index) is given twice; a sparse tensor's indices are distinct",
            w[0]
        )));
    }
    let mut data = vec![0u8; bytes as usize];
    for (k, &at) in linear.iter().enumerate() {
        let (at, k) = (at as usize * size, k * size);
        data[at..at + size].copy_from_slice(&vals.data[k..k + size]);
    }
    Ok(Tensor::new(vals.dtype, dims.clone(), data))
}
