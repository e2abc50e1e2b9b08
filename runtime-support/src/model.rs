//! What the Rust modules `onnxc-build` generates share: their error type and an owned
//! workspace. Plain Rust API (nothing here is exported to C).

use crate::abi;
use std::ffi::c_void;
use std::fmt;

/// Why a call of a compiled model failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A tensor passed with another number of elements than the model's shape gives.
    Shape {
        tensor: &'static str,
        shape: &'static [usize],
        expected: usize,
        given: usize,
    },
    /// The run returned this status (`onnxc_runtime::abi`'s `ONNXC_ERR_*`).
    Run(i32),
    /// The workspace of this many bytes could not be allocated.
    Alloc(usize),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Shape {
                tensor,
                shape,
                expected,
                given,
            } => write!(
                f,
                "tensor '{tensor}' has {given} elements; the model's shape {shape:?} holds \
                 {expected}"
            ),
            Error::Run(code) => write!(f, "the model failed ({code}): {}", abi::strerror(*code)),
            Error::Alloc(bytes) => write!(f, "cannot allocate a {bytes}-byte workspace"),
        }
    }
}

impl std::error::Error for Error {}

/// `Ok` for status 0, else `Error::Run`.
pub fn status(code: i32) -> Result<(), Error> {
    if code == 0 {
        Ok(())
    } else {
        Err(Error::Run(code))
    }
}

/// Checks that `tensor`, of the model's `shape`, is given `given` elements.
pub fn check_len(tensor: &'static str, shape: &'static [usize], given: usize) -> Result<(), Error> {
    check_items(tensor, shape, 1, given)
}

/// Checks that `tensor`, `items` items of the model's one-item `shape` (a run-time batch),
/// is given `given` elements.
pub fn check_items(
    tensor: &'static str,
    shape: &'static [usize],
    items: usize,
    given: usize,
) -> Result<(), Error> {
    let expected = shape.iter().product::<usize>().saturating_mul(items);
    if given == expected {
        Ok(())
    } else {
        Err(Error::Shape {
            tensor,
            shape,
            expected,
            given,
        })
    }
}

/// A 64-byte aligned workspace a model instance owns (`onnxc_workspace_alloc`), freed on
/// drop.
pub struct Workspace {
    ptr: *mut u8,
    bytes: usize,
}

// SAFETY: the workspace is plain memory owned by this value; nothing else refers to it.
unsafe impl Send for Workspace {}

impl Workspace {
    pub fn new(bytes: usize) -> Result<Workspace, Error> {
        // SAFETY: plain allocation, released in `drop`.
        let ptr = unsafe { abi::onnxc_workspace_alloc(bytes as u64) };
        if ptr.is_null() {
            return Err(Error::Alloc(bytes));
        }
        Ok(Workspace { ptr, bytes })
    }

    /// Its bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The pointer a model's run functions take.
    pub fn as_mut_ptr(&mut self) -> *mut c_void {
        self.ptr as *mut c_void
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` by onnxc_workspace_alloc, freed once.
        unsafe { abi::onnxc_workspace_free(self.ptr) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_statuses_and_workspaces() {
        static SHAPE: [usize; 2] = [2, 3];
        assert_eq!(check_len("x", &SHAPE, 6), Ok(()));
        let e = check_len("x", &SHAPE, 5).unwrap_err();
        assert_eq!(
            e.to_string(),
            "tensor 'x' has 5 elements; the model's shape [2, 3] holds 6"
        );
        assert_eq!(status(0), Ok(()));
        assert!(
            status(abi::ONNXC_ERR_INDEX)
                .unwrap_err()
                .to_string()
                .contains("index")
        );
        let mut w = Workspace::new(1000).unwrap();
        assert_eq!(w.len(), 1000);
        assert_eq!(w.as_mut_ptr() as usize % 64, 0);
    }
}
