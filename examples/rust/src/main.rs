//! Runs the onnxc-compiled `tiny_cnn` model through the module onnxc-build generated and
//! prints the top-5 classes, then runs it again on two threads of the runtime's pool.
//! `cargo run --release`.

mod tiny_cnn {
    include!(concat!(env!("OUT_DIR"), "/tiny_cnn.rs"));
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut model = tiny_cnn::TinyCnn::new()?;
    let len: usize = tiny_cnn::shapes::IMAGE.iter().product();
    let image: Vec<f32> = (0..len).map(|i| i as f32 / len as f32).collect();
    let probs = model.run(&image)?.probs;
    // A slice of the wrong length is an error, not a read past it.
    assert!(model.run(&image[1..]).is_err());

    let pool = onnxc_runtime::par::Pool::new(2)?;
    let threaded = model.run_threaded(&pool.threads(), &image)?.probs;
    if threaded.iter().zip(&probs).all(|(a, b)| a.to_bits() == b.to_bits()) {
        println!("2 threads: bit-identical");
    } else {
        return Err("2 threads: the outputs differ from one thread's".into());
    }
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
    println!("top-5:");
    for &c in &order[..5] {
        println!("  class {c}  p={:.6}", probs[c]);
    }
    Ok(())
}
