//! Runs the onnxc-compiled `tiny_cnn` model through the module onnxc-build generated and
//! prints the top-5 classes, then runs it again on two threads of the runtime's pool, and
//! runs batches of 1 and 3 images through one object of `tiny_cnn_batch` (a dynamic batch
//! axis), and runs `tiny_detector`, whose outputs have as many rows as boxes survive its
//! NonMaxSuppression. `cargo run --release`.

mod tiny_cnn {
    include!(concat!(env!("OUT_DIR"), "/tiny_cnn.rs"));
}

mod tiny_cnn_batch {
    include!(concat!(env!("OUT_DIR"), "/tiny_cnn_batch.rs"));
}

mod tiny_detector {
    include!(concat!(env!("OUT_DIR"), "/tiny_detector.rs"));
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

    // One object, any batch size: each item's results are those of a one-image call.
    let mut batched = tiny_cnn_batch::TinyCnnBatch::new()?;
    let images: Vec<f32> = (0..3 * len).map(|i| (i % 997) as f32 / 997.0).collect();
    for items in [1, 3] {
        let all = batched.run_batch(items, &images[..items * len])?.probs;
        for (i, image) in images[..items * len].chunks(len).enumerate() {
            let one = batched.run(image)?.probs;
            let item = &all[i * probs.len()..(i + 1) * probs.len()];
            if item.iter().zip(&one).any(|(a, b)| a.to_bits() != b.to_bits()) {
                return Err(format!("batch of {items}: item {i} differs from its own run").into());
            }
        }
        println!("batch of {items}: each item bit-identical to its one-image run");
    }
    // Inputs that are not a whole number of items are an error.
    assert!(batched.run_batch(2, &images[..len]).is_err());

    // Rows as many as the data selects: the kept boxes, with their dims.
    let mut detector = tiny_detector::TinyDetector::new()?;
    let pixels: usize = tiny_detector::shapes::IMAGE.iter().product();
    for (name, image) in [
        ("a", (0..pixels).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect::<Vec<f32>>()),
        ("b", (0..pixels).map(|i| (i as f32 * 0.37).sin()).collect()),
    ] {
        let found = detector.run(&image)?;
        let n = found.boxes_dims[0];
        if found.boxes_dims != [n, 4] || found.boxes.len() != 4 * n || found.scores.len() != n {
            return Err(format!("image {name}: inconsistent detections").into());
        }
        println!("image {name}: {n} detections");
    }

    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
    println!("top-5:");
    for &c in &order[..5] {
        println!("  class {c}  p={:.6}", probs[c]);
    }
    Ok(())
}
