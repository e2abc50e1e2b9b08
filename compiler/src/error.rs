//! Errors. Model errors name the node, op type and opset and say what to do; compiler bugs
//! are `Internal` and say so.

use std::fmt;

/// One ONNX node the compiler cannot handle.
#[derive(Debug, Clone, PartialEq)]
pub struct Unsupported {
    pub node: String,
    pub op_type: String,
    pub domain: String,
    pub opset: i64,
    pub reason: String,
}

#[derive(Debug)]
pub enum Error {
    /// Reading or writing a file failed.
    Io {
        path: String,
        source: std::io::Error,
    },
    /// The bytes are not a valid ONNX model.
    Parse(String),
    /// Every node the compiler cannot handle, collected before failing.
    Unsupported(Vec<Unsupported>),
    /// The model is malformed or inconsistent (bad attribute, shape mismatch, …).
    Model(String),
    /// A symbolic dim has no value and the compiled code needs one.
    NeedShape(String),
    /// Invalid command-line usage or input data.
    Usage(String),
    /// Linking or running a compiled model failed.
    Tool(String),
    /// A bug in onnxc: an invariant broke after the model was validated.
    Internal(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{path}: {source}"),
            Error::Parse(m) => write!(f, "not a valid ONNX model: {m}"),
            Error::Unsupported(list) => {
                let mut ops: Vec<String> = list
                    .iter()
                    .map(|u| {
                        let dom = if u.domain.is_empty() {
                            String::new()
                        } else {
                            format!("{}::", u.domain)
                        };
                        format!("{dom}{}-{}", u.op_type, u.opset)
                    })
                    .collect();
                ops.sort();
                ops.dedup();
                writeln!(
                    f,
                    "the model uses {} node(s) onnxc cannot compile ({}):",
                    list.len(),
                    ops.join(", ")
                )?;
                for u in list {
                    let dom = if u.domain.is_empty() {
                        "ai.onnx".to_string()
                    } else {
                        u.domain.clone()
                    };
                    writeln!(
                        f,
                        "  node '{}': {} (domain {}, opset {}): {}",
                        u.node, u.op_type, dom, u.opset, u.reason
                    )?;
                }
                write!(f, "see docs/supported-ops.md for what is supported")
            }
            Error::Model(m) => write!(f, "{m}"),
            Error::NeedShape(m) => write!(f, "{m}"),
            Error::Usage(m) => write!(f, "{m}"),
            Error::Tool(m) => write!(f, "{m}"),
            Error::Internal(m) => write!(
                f,
                "internal compiler error (a bug in onnxc, please report it): {m}"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}

/// `bail!`-style constructor for model errors.
#[macro_export]
macro_rules! model_err {
    ($($arg:tt)*) => { $crate::error::Error::Model(format!($($arg)*)) };
}
