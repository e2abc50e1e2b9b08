//! Runs the onnxc-compiled `tiny_cnn` model through a small safe wrapper and prints the top-5
//! classes, then runs it again on two threads of the runtime's pool. `cargo run --release`
//! (after `cargo build --release` at the workspace root).

mod tiny_cnn {
    //! Safe wrapper over the generated C ABI (`tiny_cnn.h`).
    use onnxc_runtime::abi;
    use onnxc_runtime::par::Threads;
    use std::ffi::{CStr, c_void};

    unsafe extern "C" {
        fn tiny_cnn_run(inputs: *const *const c_void, outputs: *const *mut c_void, workspace: *mut c_void) -> i32;
        fn tiny_cnn_run_threaded(
            inputs: *const *const c_void,
            outputs: *const *mut c_void,
            workspace: *mut c_void,
            workspace_bytes: usize,
            threads: *const Threads,
        ) -> i32;
        fn tiny_cnn_workspace_size_threads(workers: usize) -> usize;
    }

    pub const INPUT_LEN: usize = 3 * 32 * 32;
    pub const CLASSES: usize = 10;

    #[derive(Debug)]
    pub struct Error(pub i32);

    impl std::fmt::Display for Error {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            // SAFETY: onnxc_strerror returns a static NUL-terminated string.
            let msg = unsafe { CStr::from_ptr(abi::onnxc_strerror(self.0)) };
            write!(f, "tiny_cnn_run failed ({}): {}", self.0, msg.to_string_lossy())
        }
    }

    /// One model instance with its own workspace, for calls on up to `workers` threads;
    /// `&mut self` keeps calls exclusive.
    pub struct TinyCnn {
        workspace: *mut u8,
        bytes: usize,
    }

    impl TinyCnn {
        pub fn new(workers: usize) -> TinyCnn {
            // SAFETY: a pure function of the model.
            let bytes = unsafe { tiny_cnn_workspace_size_threads(workers) };
            // SAFETY: plain allocation of the size the model reports.
            let workspace = unsafe { abi::onnxc_workspace_alloc(bytes as u64) };
            assert!(!workspace.is_null(), "workspace allocation failed");
            TinyCnn { workspace, bytes }
        }

        /// `image`: 1×3×32×32 row-major; returns the 10 class probabilities.
        pub fn run(&mut self, image: &[f32; INPUT_LEN]) -> Result<[f32; CLASSES], Error> {
            let mut probs = [0f32; CLASSES];
            let inputs = [image.as_ptr() as *const c_void];
            let outputs = [probs.as_mut_ptr() as *mut c_void];
            // SAFETY: buffer sizes match tiny_cnn.h; the workspace is ours and large enough.
            let rc = unsafe { tiny_cnn_run(inputs.as_ptr(), outputs.as_ptr(), self.workspace as *mut c_void) };
            if rc == 0 { Ok(probs) } else { Err(Error(rc)) }
        }

        /// As `run`, on the threads of `threads` (a pool's callback table: the runtime's
        /// `Pool`, or one of the application's); the same bits as `run`.
        pub fn run_threaded(&mut self, image: &[f32; INPUT_LEN], threads: &Threads) -> Result<[f32; CLASSES], Error> {
            let mut probs = [0f32; CLASSES];
            let inputs = [image.as_ptr() as *const c_void];
            let outputs = [probs.as_mut_ptr() as *mut c_void];
            // SAFETY: buffer sizes match tiny_cnn.h; the workspace is ours, `bytes` long (the
            // model returns ONNXC_ERR_WORKSPACE if `threads` has more workers than it holds).
            let rc = unsafe {
                tiny_cnn_run_threaded(inputs.as_ptr(), outputs.as_ptr(), self.workspace as *mut c_void, self.bytes, threads)
            };
            if rc == 0 { Ok(probs) } else { Err(Error(rc)) }
        }
    }

    impl Drop for TinyCnn {
        fn drop(&mut self) {
            // SAFETY: allocated in new() by onnxc_workspace_alloc.
            unsafe { abi::onnxc_workspace_free(self.workspace) }
        }
    }
}

fn main() {
    let pool = onnxc_runtime::par::Pool::new(2).expect("start the runtime's pool");
    let mut model = tiny_cnn::TinyCnn::new(2);
    let mut image = [0f32; tiny_cnn::INPUT_LEN];
    for (i, v) in image.iter_mut().enumerate() {
        *v = i as f32 / tiny_cnn::INPUT_LEN as f32;
    }
    let probs = match model.run(&image) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    match model.run_threaded(&image, &pool.threads()) {
        Ok(p) if p.iter().zip(&probs).all(|(a, b)| a.to_bits() == b.to_bits()) => println!("2 threads: bit-identical"),
        Ok(_) => {
            eprintln!("2 threads: the outputs differ from one thread's");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
    println!("top-5:");
    for &c in &order[..5] {
        println!("  class {c}  p={:.6}", probs[c]);
    }
}
