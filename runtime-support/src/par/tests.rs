use super::*;
use std::sync::atomic::AtomicU32;

/// Runs `n` tasks on a pool of `workers`, checking that every task runs once, that worker
/// indices are below `workers` and that no two running tasks share one.
fn check_pool(pool: &Pool, workers: usize, n: usize) {
    let runs: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    let busy: Vec<AtomicBool> = (0..workers).map(|_| AtomicBool::new(false)).collect();
    pool.run(n, &|task, worker| {
        assert!(worker < workers, "worker {worker} of {workers}");
        assert!(
            !busy[worker].swap(true, Ordering::SeqCst),
            "worker {worker} runs two tasks at once"
        );
        runs[task].fetch_add(1, Ordering::Relaxed);
        std::hint::black_box((0..200).sum::<u64>());
        busy[worker].store(false, Ordering::SeqCst);
    });
    assert!(runs.iter().all(|r| r.load(Ordering::Relaxed) == 1));
}

#[test]
fn a_pool_runs_every_task_once_on_distinct_workers() {
    for workers in [1, 2, 3, 4, 8] {
        let pool = Pool::new(workers).unwrap();
        for n in [0, 1, 2, 3, 7, 64, 1000] {
            check_pool(&pool, workers, n);
        }
    }
}

#[test]
fn blocks_partition_the_tasks_in_order_the_callers_first_and_largest() {
    for workers in 1..=9 {
        for n in 0..40 {
            let blocks: Vec<_> = (0..workers).map(|w| block(w, n, workers)).collect();
            assert_eq!(blocks[0].start, 0);
            assert_eq!(blocks[workers - 1].end, n);
            assert!(blocks.windows(2).all(|b| b[0].end == b[1].start));
            assert!(blocks.iter().all(|b| b.len() <= blocks[0].len()));
            assert!(blocks.iter().all(|b| b.len() + 1 >= blocks[0].len()));
        }
    }
}

#[test]
fn many_calls_of_every_size_with_workers_oversubscribing_the_cores() {
    // More workers than this machine's cores: some are descheduled mid-call, so the others
    // take over their blocks and claims meet calls that have ended.
    let pool = Pool::new(6).unwrap();
    for i in 0..3000 {
        check_pool(&pool, 6, i % 13);
    }
}

#[test]
fn calls_larger_than_one_round_run_every_task() {
    let pool = Pool::new(3).unwrap();
    check_pool(&pool, 3, MAX_TASKS * 2 + 5);
}

#[test]
fn a_pool_wakes_its_sleeping_workers() {
    let pool = Pool::new(2).unwrap();
    check_pool(&pool, 2, 16);
    // Long enough for the worker to stop spinning and sleep.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let seen = AtomicBool::new(false);
    // Tasks that wait until the other worker has run one: only possible if it woke.
    let t0 = std::time::Instant::now();
    pool.run(2, &|_, w| {
        if w == 1 {
            seen.store(true, Ordering::SeqCst);
        }
        while !seen.load(Ordering::SeqCst) && t0.elapsed().as_secs() < 10 {
            std::hint::spin_loop();
        }
    });
    assert!(
        seen.load(Ordering::SeqCst),
        "the sleeping worker never woke"
    );
}

#[test]
fn threads_calling_one_pool_at_once_all_finish() {
    let pool = Pool::new(3).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for n in [5, 50, 500] {
                    check_pool(&pool, 3, n);
                }
            });
        }
    });
}

#[test]
fn the_c_pool_api_round_trips() {
    // SAFETY: the pool is created, used and destroyed here.
    unsafe {
        assert!(onnxc_pool_create(0).is_null());
        let p = onnxc_pool_create(4);
        assert!(!p.is_null());
        let t = onnxc_pool_threads(p);
        assert_eq!(t.workers, 4);
        let par = Par::from_raw(&t);
        assert_eq!(par.workers(), 4);
        let sum = AtomicUsize::new(0);
        par.run(100, &|task, _| {
            sum.fetch_add(task, Ordering::Relaxed);
        });
        assert_eq!(sum.into_inner(), 4950);
        onnxc_pool_destroy(p);
        onnxc_pool_destroy(std::ptr::null_mut());
        let none = onnxc_pool_threads(std::ptr::null());
        assert_eq!(Par::from_raw(&none).workers(), 1);
        assert_eq!(Par::from_raw(std::ptr::null()).workers(), 1);
    }
}

struct LoopLog {
    hits: Vec<AtomicU32>,
    fail_at: i64,
}

unsafe extern "C" fn loop_body(
    ctx: *const c_void,
    b: i64,
    e: i64,
    _threads: *const Threads,
    _worker: usize,
) -> i32 {
    // SAFETY: the test passes a `LoopLog`.
    let log = unsafe { &*(ctx as *const LoopLog) };
    let mut rc = 0;
    for i in b..e {
        log.hits[i as usize].fetch_add(1, Ordering::Relaxed);
        if i >= log.fail_at && rc == 0 {
            rc = 7 + (i % 3) as i32;
        }
    }
    // Chunk bounds: aligned to 4, and no chunk but the whole loop shorter than 4.
    if b % 4 != 0 || (e - b < 4 && !(b == 0 && e == log.hits.len() as i64)) {
        return 99;
    }
    rc
}

#[test]
fn a_parallel_loop_covers_every_iteration_once_in_aligned_chunks() {
    let pool = Pool::new(3).unwrap();
    let t = pool.threads();
    for threads in [std::ptr::null(), &t as *const Threads] {
        for extent in [0i64, 1, 3, 4, 5, 10, 17, 64, 1001, 100_000] {
            for grain in [1, 4, 100] {
                let log = LoopLog {
                    hits: (0..extent).map(|_| AtomicU32::new(0)).collect(),
                    fail_at: i64::MAX,
                };
                // SAFETY: the body reads the log, disjoint ranges.
                let rc = unsafe {
                    onnxc_parallel_loop(
                        threads,
                        extent,
                        grain,
                        4,
                        0,
                        loop_body,
                        &log as *const LoopLog as _,
                    )
                };
                assert_eq!(rc, 0, "extent {extent} grain {grain}");
                assert!(log.hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            }
        }
    }
}

#[test]
fn a_parallel_loop_reports_the_first_failing_chunk() {
    let pool = Pool::new(4).unwrap();
    let t = pool.threads();
    for fail_at in [0i64, 5, 999, 4000, 9999] {
        let log = LoopLog {
            hits: (0..10_000).map(|_| AtomicU32::new(0)).collect(),
            fail_at,
        };
        // SAFETY: as above.
        let (par, seq) = unsafe {
            (
                onnxc_parallel_loop(&t, 10_000, 8, 4, 0, loop_body, &log as *const LoopLog as _),
                onnxc_parallel_loop(
                    std::ptr::null(),
                    10_000,
                    8,
                    4,
                    0,
                    loop_body,
                    &log as *const LoopLog as _,
                ),
            )
        };
        // The first chunk that fails does so at its first iteration at or past fail_at,
        // which is fail_at itself: the same code as the sequential loop.
        assert_eq!(par, seq, "fail_at {fail_at}");
        assert_eq!(seq, 7 + (fail_at % 3) as i32);
    }
}

#[test]
fn scratch_lays_out_the_shared_area_then_64_byte_slots() {
    let base = 0x1000 as *mut f32;
    let need = ScratchNeed {
        shared: 100,
        per_worker: 40,
    };
    assert_eq!(
        need.rounded(),
        ScratchNeed {
            shared: 128,
            per_worker: 64
        }
    );
    let (shared, slots) = need.layout(base);
    assert_eq!(shared, base);
    assert_eq!(slots.at(0) as usize, 0x1000 + 128);
    assert_eq!(slots.at(3) as usize, 0x1000 + 128 + 3 * 64);
    assert_eq!(slots.offset(2).at(1) as usize, 0x1000 + 128 + 64 + 8);
    assert_eq!(Slots::single(base).at(5), base);
}

unsafe extern "C" fn call_loop_body(
    ctx: *const c_void,
    b: i64,
    e: i64,
    threads: *const Threads,
    worker: usize,
) -> i32 {
    // SAFETY: the test passes (split count, whole count).
    let (split, whole) = unsafe { &*(ctx as *const (AtomicU32, AtomicU32)) };
    if threads.is_null() {
        assert!(worker < 4);
        split.fetch_add((e - b) as u32, Ordering::Relaxed);
    } else {
        assert_eq!((b, worker), (0, 0));
        whole.fetch_add(e as u32, Ordering::Relaxed);
    }
    0
}

#[test]
fn a_loop_of_kernel_calls_splits_only_with_two_iterations_per_worker() {
    let pool = Pool::new(4).unwrap();
    let t = pool.threads();
    for (extent, split) in [(2i64, false), (7, false), (8, true), (100, true)] {
        let counts = (AtomicU32::new(0), AtomicU32::new(0));
        // SAFETY: the body reads the counters.
        let rc = unsafe {
            onnxc_parallel_loop(
                &t,
                extent,
                1,
                1,
                1,
                call_loop_body,
                &counts as *const _ as _,
            )
        };
        assert_eq!(rc, 0);
        let (s, w) = (counts.0.into_inner(), counts.1.into_inner());
        assert_eq!(
            (s, w),
            if split {
                (extent as u32, 0)
            } else {
                (0, extent as u32)
            }
        );
    }
}
