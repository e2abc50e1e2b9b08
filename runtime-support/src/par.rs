//! Intra-op parallelism: the caller's thread pool as a `parallel_for` callback table
//! (`onnxc_threads`), the kernels' view of it (`Par`), the runtime's own pool for callers
//! that have none (`onnxc_pool_*`), and the parallel loop generated code calls
//! (`onnxc_parallel_loop`).
//!
//! **Contract of a pool** (`onnxc_threads`): `parallel_for(pool, n, fn, ctx)` runs
//! `fn(ctx, task, worker)` once for every `task < n` and returns when all have returned;
//! `worker < workers` names the thread running the task, and two tasks of one call that run
//! at the same time never share a `worker`. Tasks may run in any order, on any thread,
//! including the caller's. That is what an OpenMP `parallel for` with
//! `omp_get_thread_num()`, rayon's `current_thread_index()` or a platform dispatcher gives.
//!
//! **Determinism:** kernels partition their *outputs* only: every output element is computed
//! by one task, with the same operations in the same order whatever the partition, so the
//! results are bit-identical for every thread count (and equal to the single-threaded entry
//! point's). Per-worker scratch comes from the caller's workspace (`ScratchNeed`), and the
//! pool hands tasks over without allocating: threading adds no allocation to a run.

use std::ffi::c_void;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// A task: `fn(ctx, task, worker)`.
pub type TaskFn = unsafe extern "C" fn(ctx: *mut c_void, task: usize, worker: usize);
/// Runs `fn(ctx, task, worker)` for every `task < n` (the module's contract).
pub type ParallelFor =
    unsafe extern "C" fn(pool: *mut c_void, n: usize, f: TaskFn, ctx: *mut c_void);

/// The C struct `onnxc_threads`: a pool as the generated code and kernels see it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Threads {
    pub parallel_for: Option<ParallelFor>,
    pub pool: *mut c_void,
    /// The most tasks that run at once (worker indices are below it); at least 1.
    pub workers: usize,
}

/// Most workers a run takes (a bound on the workspace's per-worker scratch arithmetic).
pub const MAX_WORKERS: usize = 1024;
/// Least work of a task split by `for_ranges` (elements touched, or multiply-adds): a few
/// microseconds, several times the cost of handing a task to a spinning worker.
pub const MIN_TASK_WORK: usize = 1 << 15;
/// Most tasks of one `parallel_for` call; `Par::run` splits larger counts into rounds.
const MAX_TASKS: usize = 0xffff;

/// The threads a kernel may use: a pool, or none (sequential).
#[derive(Clone, Copy)]
pub struct Par<'a> {
    t: Option<&'a Threads>,
}

impl Par<'static> {
    /// No threads: tasks run in order on the calling thread, as worker 0.
    pub const SEQ: Par<'static> = Par { t: None };
}

impl<'a> Par<'a> {
    /// The pool `t` points to; sequential when `t` is null, has no `parallel_for` or one
    /// worker.
    ///
    /// # Safety
    /// `t` is null or points to a `Threads` that outlives `'a` and keeps the module's
    /// contract.
    pub unsafe fn from_raw(t: *const Threads) -> Par<'a> {
        // SAFETY: caller contract.
        let t = unsafe { t.as_ref() };
        Par {
            t: t.filter(|t| t.parallel_for.is_some() && t.workers > 1),
        }
    }

    /// Threads that may run tasks at once (1: sequential).
    pub fn workers(&self) -> usize {
        self.t.map_or(1, |t| t.workers.min(MAX_WORKERS))
    }

    /// Tasks worth making of `work` units when a task should have at least `min` of them:
    /// 1 when the pool has one worker or the work is small, otherwise up to `per_worker`
    /// tasks per worker (more tasks than workers balance uneven ones), at most `max`.
    pub fn tasks(&self, work: usize, min: usize, per_worker: usize, max: usize) -> usize {
        let w = self.workers();
        if w == 1 {
            return 1;
        }
        // The kernels' unit tests split even their small cases, to test every split.
        let min = if cfg!(test) { 1 } else { min.max(1) };
        (work / min).min(w * per_worker).min(max).max(1)
    }

    /// Runs `f(items, worker)` over consecutive ranges that partition `0..count`, one task
    /// of at least `MIN_TASK_WORK` units (each item costing `cost`) per worker at most, the
    /// items dealt out evenly (task `i` of `t` takes `⌈i·count/t⌉ .. ⌈(i+1)·count/t⌉`, so
    /// the earlier tasks are the larger ones: the runtime's pool runs task 0 on the caller,
    /// which starts first); one range when the pool has one worker or the work is small.
    /// One even task per worker is the shortest schedule of equal items: two per worker,
    /// rounded up, left one worker twice the other's share (6 column tiles as 2, 2, 2 on 2
    /// workers: AlexNet's 12×12 convolutions ran 1.25-1.40× faster on 2 threads, now
    /// 1.84-1.92×).
    ///
    /// # Safety
    /// As `run`.
    pub unsafe fn for_ranges(&self, count: usize, cost: usize, f: &dyn Fn(Range<usize>, usize)) {
        let t = self.tasks(count.saturating_mul(cost.max(1)), MIN_TASK_WORK, 1, count);
        // SAFETY: forwarded.
        unsafe { self.run_ranges(count, t, f) };
    }

    /// Runs `f(items, worker)` over `t` (at most `count`) consecutive ranges that partition
    /// `0..count`, their sizes at most one apart, the larger first (task `i` takes
    /// `⌈i·count/t⌉ .. ⌈(i+1)·count/t⌉`), as `for_ranges` deals them. Ranges of ⌈count/t⌉
    /// and a short last one would put more into one worker's block of tasks (5 items as 2,
    /// 2, 1 on 2 workers: 4 against 1).
    ///
    /// # Safety
    /// As `run`.
    pub unsafe fn run_ranges(&self, count: usize, t: usize, f: &dyn Fn(Range<usize>, usize)) {
        let t = t.clamp(1, count.max(1));
        // SAFETY: forwarded.
        unsafe {
            self.run(t, &|i, w| {
                f((i * count).div_ceil(t)..((i + 1) * count).div_ceil(t), w)
            })
        };
    }

    /// Runs `f(task, worker)` for every `task < n` and returns when all have returned.
    ///
    /// # Safety
    /// `f` may run on several threads at once (for distinct tasks and workers): whatever it
    /// reaches must be safe to use so — kernels share read-only inputs and raw pointers to
    /// the disjoint parts of their outputs each task writes.
    pub unsafe fn run(&self, n: usize, f: &dyn Fn(usize, usize)) {
        let Some(t) = self.t.filter(|_| n > 1) else {
            for task in 0..n {
                f(task, 0);
            }
            return;
        };
        unsafe extern "C" fn tramp(ctx: *mut c_void, task: usize, worker: usize) {
            // SAFETY: ctx is the `Round` below, alive for the whole `parallel_for` call.
            let r = unsafe { &*(ctx as *const Round) };
            (r.f)(r.base + task, worker);
        }
        struct Round<'f> {
            f: &'f dyn Fn(usize, usize),
            base: usize,
        }
        let pf = t
            .parallel_for
            .expect("Par holds only pools with parallel_for");
        let mut base = 0;
        while base < n {
            let count = (n - base).min(MAX_TASKS);
            let r = Round { f, base };
            // SAFETY: the pool's contract; `r` outlives the call, which returns when every
            // task has returned.
            unsafe { pf(t.pool, count, tramp, &r as *const Round as *mut c_void) };
            base += count;
        }
    }
}

/// What a kernel call asks of its scratch (bytes): a `shared` area all its workers use
/// (filled before they start, e.g. a zero-padded input), then a slot of `per_worker` bytes
/// for each worker. Laid out from the call's scratch pointer (64-byte aligned): the shared
/// area, then the slots, each rounded up to 64 bytes. A program's workspace holds
/// `max shared + workers · max per_worker` after its arena.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScratchNeed {
    pub shared: usize,
    pub per_worker: usize,
}

impl ScratchNeed {
    /// Only a shared area (a kernel whose workers need no scratch of their own).
    pub fn shared(bytes: usize) -> ScratchNeed {
        ScratchNeed {
            shared: bytes,
            per_worker: 0,
        }
    }

    /// Bytes a call with one worker (a sequential one) needs.
    pub fn single(&self) -> usize {
        let r = self.rounded();
        r.shared + r.per_worker
    }

    /// The larger of each part.
    pub fn max(self, o: ScratchNeed) -> ScratchNeed {
        ScratchNeed {
            shared: self.shared.max(o.shared),
            per_worker: self.per_worker.max(o.per_worker),
        }
    }

    /// Both parts rounded up to whole 64-byte lines, as they are laid out.
    pub fn rounded(&self) -> ScratchNeed {
        ScratchNeed {
            shared: slot_bytes(self.shared),
            per_worker: slot_bytes(self.per_worker),
        }
    }

    /// The shared area and the workers' slots of a call's scratch at `base`.
    pub fn layout(&self, base: *mut f32) -> (*mut f32, Slots) {
        let r = self.rounded();
        (
            base,
            Slots {
                base: base.wrapping_byte_add(r.shared),
                stride: r.per_worker / 4,
            },
        )
    }
}

/// Bytes of one 64-byte aligned piece of scratch holding `bytes`.
pub const fn slot_bytes(bytes: usize) -> usize {
    bytes.next_multiple_of(64)
}

/// The workers' slots of a kernel's scratch (`ScratchNeed::layout`), or a part of each.
#[derive(Clone, Copy, Debug)]
pub struct Slots {
    base: *mut f32,
    /// Floats from one worker's slot to the next.
    stride: usize,
}

impl Slots {
    /// One area for worker 0 only (a sequential caller's scratch).
    pub fn single(base: *mut f32) -> Slots {
        Slots { base, stride: 0 }
    }

    /// Worker `w`'s slot.
    pub fn at(&self, w: usize) -> *mut f32 {
        self.base.wrapping_add(w * self.stride)
    }

    /// The part of every slot from `floats` on.
    pub fn offset(&self, floats: usize) -> Slots {
        Slots {
            base: self.base.wrapping_add(floats),
            stride: self.stride,
        }
    }
}

/// A loop body generated code hands `onnxc_parallel_loop`: iterations `[begin, end)` of the
/// step's outer loop, run as `worker` (its scratch slot), passing `threads` (null when the
/// loop is split) to the kernels it calls; returns the step's error code for them (0: none).
pub type LoopFn = unsafe extern "C" fn(
    ctx: *const c_void,
    begin: i64,
    end: i64,
    threads: *const Threads,
    worker: usize,
) -> i32;

/// Runs iterations `0..extent` of a generated step's outer loop, split into chunks of at
/// least `grain` iterations over the pool's workers, or whole (on the calling thread, as
/// worker 0) when `threads` is null or the loop is short. A loop whose iterations call
/// kernels (`calls` ≠ 0) is split only when it has at least two iterations per worker;
/// otherwise it runs whole and passes `threads` on to its kernels. Chunk boundaries are
/// multiples of `align` and no chunk but a whole loop is shorter than `align`: a vector
/// loop's tail (its last `align` iterations, redone) stays inside its chunk. Returns the
/// error of the first chunk (in loop order) that failed.
///
/// # Safety
/// `threads` as `Par::from_raw`; `body` runs concurrently for disjoint ranges as distinct
/// workers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_parallel_loop(
    threads: *const Threads,
    extent: i64,
    grain: i64,
    align: i64,
    calls: i64,
    body: LoopFn,
    ctx: *const c_void,
) -> i32 {
    // SAFETY: caller contract.
    let par = unsafe { Par::from_raw(threads) };
    let (extent, grain, align) = (extent.max(0), grain.max(1), align.max(1));
    let mut tasks = par.tasks(extent as usize, grain as usize, 4, MAX_TASKS) as i64;
    if calls != 0 && extent < 2 * par.workers() as i64 {
        tasks = 1;
    }
    if tasks <= 1 {
        // SAFETY: caller contract.
        return unsafe { body(ctx, 0, extent, threads, 0) };
    }
    let (extent, align) = (extent as u64, align as u64);
    let chunk = extent.div_ceil(tasks as u64).next_multiple_of(align);
    // Whole chunks, the last one taking the rest (at least `chunk` long).
    let tasks = (extent / chunk).max(1) as usize;
    // The first failing chunk's (index, code), as `index << 32 | code`: u64::MAX if none.
    let first = AtomicU64::new(u64::MAX);
    let run = |t: usize, worker: usize| {
        let b = t as u64 * chunk;
        let e = if t + 1 == tasks { extent } else { b + chunk };
        // SAFETY: caller contract; chunks are disjoint, each run by one worker at a time.
        let rc = unsafe { body(ctx, b as i64, e as i64, std::ptr::null(), worker) };
        if rc != 0 {
            first.fetch_min((t as u64) << 32 | rc as u32 as u64, Ordering::Relaxed);
        }
    };
    // SAFETY: the caller's contract: chunks may run concurrently.
    unsafe { par.run(tasks, &run) };
    match first.into_inner() {
        u64::MAX => 0,
        v => v as u32 as i32,
    }
}

/// The workers a run with `threads` uses (1 for null, no `parallel_for` or one worker; at
/// most `MAX_WORKERS`): its workspace holds that many scratch slots.
///
/// # Safety
/// As `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_threads_workers(threads: *const Threads) -> usize {
    // SAFETY: caller contract.
    unsafe { Par::from_raw(threads) }.workers()
}

// ---------------------------------------------------------------------------------------
// Valgrind's race detectors (helgrind, DRD) see only pthread primitives; the pool hands
// tasks over through atomics. These client requests tell them where the hand-overs are:
// everything a thread did before `happens_before(tag)` is visible after another's
// `happens_after(tag)` (helgrind's ANNOTATE_HAPPENS_BEFORE/AFTER). Outside valgrind the
// magic sequence is a few no-op instructions.

mod annotate {
    /// helgrind.h's `_VG_USERREQ__HG_USERSO_SEND_PRE` and `_RECV_POST`
    /// (`VG_USERREQ_TOOL_BASE('H','G') + 256 + 33` and `+ 34`), which DRD also honours.
    const SEND_PRE: u64 = 0x4847_0121;
    const RECV_POST: u64 = 0x4847_0122;
    /// `_VG_USERREQ__HG_ARANGE_MAKE_UNTRACKED` (helgrind) and
    /// `VG_USERREQ__DRD_START_SUPPRESSION` (DRD): accesses to a range are not checked.
    const HG_UNTRACKED: u64 = 0x4847_0127;
    const DRD_SUPPRESS: u64 = 0x4452_0002;

    #[inline(always)]
    fn request(code: u64, a: usize, b: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let args: [u64; 6] = [code, a as u64, b as u64, 0, 0, 0];
            // SAFETY: valgrind's amd64 client-request sequence: rdi rotated by 128 bits in
            // all (unchanged), `xchg rbx, rbx` a no-op, the flags clobbered; under valgrind
            // it reads `args` and writes rdx. No memory is written.
            unsafe {
                std::arch::asm!(
                    "rol rdi, 3", "rol rdi, 13", "rol rdi, 61", "rol rdi, 51", "xchg rbx, rbx",
                    inout("rdx") 0u64 => _,
                    in("rax") args.as_ptr(),
                    options(nostack),
                )
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (code, a, b);
    }

    #[inline(always)]
    pub(super) fn happens_before<T>(tag: &T) {
        request(SEND_PRE, tag as *const T as usize, 0);
    }

    #[inline(always)]
    pub(super) fn happens_after<T>(tag: &T) {
        request(RECV_POST, tag as *const T as usize, 0);
    }

    /// `v` is an atomic the pool synchronizes through (its races are the protocol's).
    pub(super) fn atomic<T>(v: &T) {
        let (a, n) = (v as *const T as usize, std::mem::size_of::<T>());
        request(HG_UNTRACKED, a, n);
        request(DRD_SUPPRESS, a, n);
    }
}

// ---------------------------------------------------------------------------------------
// The runtime's pool.

/// How long a worker spins for the next task before sleeping: a model's steps follow each
/// other closely, and waking a sleeping thread costs more than most steps' tasks. Measured
/// by the clock, since a pause instruction takes a few cycles on some CPUs and over a
/// hundred on others (30 ns on Zen 3): a count of them would spin ten times longer on one
/// than on another. onnxruntime's default is 2^20 pauses (32 ms on Zen 3).
const SPIN: std::time::Duration = std::time::Duration::from_millis(1);
/// Pauses between two reads of the clock while spinning (a read through Linux's vDSO costs
/// about one pause).
const SPIN_CHECK: u32 = 64;

/// The published call: `generation << 32 | tasks`. The generation changes with every call
/// (every round of a large one), so a claim never succeeds against a call that has ended.
fn call_word(generation: u64, tasks: usize) -> u64 {
    generation << 32 | tasks as u64
}

/// Worker `w`'s block of an `n`-task call on `workers`: tasks `⌈w·n/workers⌉ ..
/// ⌈(w+1)·n/workers⌉`. The caller (worker 0) gets task 0 and, when the blocks differ, a
/// larger one (it starts first); the other workers' blocks follow in order.
fn block(w: usize, n: usize, workers: usize) -> Range<usize> {
    (w * n).div_ceil(workers)..((w + 1) * n).div_ceil(workers)
}

/// Whether generation `a` was published after `b` (32-bit generations, compared by their
/// wrapping difference: a claimant is never 2^31 calls behind).
fn later(a: u64, b: u64) -> bool {
    (a as u32).wrapping_sub(b as u32) as i32 > 0
}

/// A value on cache lines of its own: the words one thread writes while others poll
/// (the published call, each worker's claims, the completion count) do not share lines.
/// 128 bytes: adjacent-line prefetchers fetch 64-byte lines in pairs.
#[repr(align(128))]
struct Line<T>(T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// What the caller publishes, read by every worker (written once per call).
struct Published {
    /// `call_word` of the call being run.
    call: AtomicU64,
    /// The call's `TaskFn` and context: written before `call` publishes them, read only by
    /// a thread that has claimed one of its tasks (so the call is still running: it returns
    /// when `done` reaches its task count).
    f: AtomicUsize,
    ctx: AtomicUsize,
    stop: AtomicBool,
}

/// The pool's state. **Scheduling:** each worker owns a block of every call's tasks
/// (`block`), runs it first and then claims what is left of the others' blocks, in order
/// after its own. So a worker that is late, descheduled or asleep delays nothing (its
/// block is taken over), and otherwise task `i` of `n` runs on the same worker in every
/// call: consecutive steps that partition their outputs alike (channel blocks, row blocks)
/// find their inputs in the cache of the core that wrote them.
struct Shared {
    published: Line<Published>,
    /// Tasks of the current call that have returned.
    done: Line<AtomicUsize>,
    /// Per worker: `generation << 32 | claimed`, the tasks of its block claimed during that
    /// generation's call (a counter at an earlier generation has none claimed).
    claims: Box<[Line<AtomicU64>]>,
    /// Workers asleep (or about to be) on `wake`.
    sleepers: Line<AtomicUsize>,
    lock: Mutex<()>,
    wake: Condvar,
    /// Held by the thread whose call the pool runs; a second caller meanwhile runs its
    /// tasks itself.
    busy: Mutex<()>,
    workers: usize,
}

impl Shared {
    /// Claims the next task of worker `v`'s block of the call `c`: its index, or None when
    /// the block has none left or `c` has ended.
    fn claim(&self, c: u64, v: usize) -> Option<usize> {
        let (generation, n) = (c >> 32, (c & 0xffff_ffff) as usize);
        let b = block(v, n, self.workers);
        let counter = &self.claims[v];
        let mut k = counter.load(Ordering::Acquire);
        loop {
            let claimed = if k >> 32 == generation {
                (k & 0xffff_ffff) as usize
            } else if later(k >> 32, generation) {
                // A later call has begun: `c`'s tasks were all claimed and done.
                return None;
            } else {
                0
            };
            if claimed >= b.len() {
                return None;
            }
            match counter.compare_exchange_weak(
                k,
                generation << 32 | (claimed + 1) as u64,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(b.start + claimed),
                Err(now) => k = now,
            }
        }
    }

    /// Runs tasks of the call `c` as `worker`: its own block's, then whatever is left of
    /// the other workers' blocks, until none is left to claim.
    fn work(&self, c: u64, worker: usize) {
        for i in 0..self.workers {
            let v = (worker + i) % self.workers;
            while let Some(task) = self.claim(c, v) {
                annotate::happens_after(&self.published.call);
                // The call that published `c` is running until this task is done: its
                // function and context are the ones stored.
                let f = self.published.f.load(Ordering::Acquire);
                let ctx = self.published.ctx.load(Ordering::Acquire);
                // SAFETY: `f` was stored from a `TaskFn` by `parallel_for`; the task index
                // and worker are the contract's.
                unsafe {
                    let f: TaskFn = std::mem::transmute::<usize, TaskFn>(f);
                    f(ctx as *mut c_void, task, worker);
                }
                annotate::happens_before(&*self.done);
                self.done.fetch_add(1, Ordering::Release);
            }
        }
    }

    fn worker_loop(&self, worker: usize) {
        // The generation of the last call this worker has worked on (0: the initial word).
        let mut seen = 0;
        loop {
            let mut since = std::time::Instant::now();
            let mut spins = 0u32;
            loop {
                if self.published.stop.load(Ordering::Relaxed) {
                    return;
                }
                let c = self.published.call.load(Ordering::Acquire);
                if c >> 32 != seen {
                    self.work(c, worker);
                    seen = c >> 32;
                    since = std::time::Instant::now();
                    spins = 0;
                    continue;
                }
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(SPIN_CHECK) && since.elapsed() >= SPIN {
                    break;
                }
            }
            let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            while self.published.call.load(Ordering::SeqCst) >> 32 == seen
                && !self.published.stop.load(Ordering::SeqCst)
            {
                g = self.wake.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            drop(g);
        }
    }
}

/// The runtime's thread pool (`onnxc_pool`): `workers - 1` threads plus the calling one.
pub struct Pool {
    shared: std::sync::Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Pool {
    /// A pool of `workers` (≥ 1) threads counting the caller's: `workers - 1` are spawned.
    pub fn new(workers: usize) -> std::io::Result<Pool> {
        let workers = workers.clamp(1, MAX_WORKERS);
        let shared = std::sync::Arc::new(Shared {
            published: Line(Published {
                call: AtomicU64::new(0),
                f: AtomicUsize::new(0),
                ctx: AtomicUsize::new(0),
                stop: AtomicBool::new(false),
            }),
            done: Line(AtomicUsize::new(0)),
            claims: (0..workers).map(|_| Line(AtomicU64::new(0))).collect(),
            sleepers: Line(AtomicUsize::new(0)),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            busy: Mutex::new(()),
            workers,
        });
        let p = &shared.published;
        annotate::atomic(&p.call);
        annotate::atomic(&p.f);
        annotate::atomic(&p.ctx);
        annotate::atomic(&p.stop);
        annotate::atomic(&*shared.done);
        annotate::atomic(&*shared.sleepers);
        for c in shared.claims.iter() {
            annotate::atomic(&**c);
        }
        let mut pool = Pool {
            shared: shared.clone(),
            threads: Vec::new(),
        };
        for w in 1..workers {
            let s = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("onnxc-worker-{w}"))
                .spawn(move || s.worker_loop(w))?;
            pool.threads.push(h);
        }
        Ok(pool)
    }

    /// The callback table of this pool.
    pub fn threads(&self) -> Threads {
        Threads {
            parallel_for: Some(pool_parallel_for),
            pool: std::sync::Arc::as_ptr(&self.shared) as *mut c_void,
            workers: self.shared.workers,
        }
    }

    /// Runs `f(task, worker)` for every `task < n` on this pool.
    pub fn run(&self, n: usize, f: &(dyn Fn(usize, usize) + Sync)) {
        let t = self.threads();
        // SAFETY: `t` describes this pool, alive for the call; `f` is Sync.
        unsafe { Par::from_raw(&t).run(n, f) };
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.published.stop.store(true, Ordering::SeqCst);
        {
            let _g = self.shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.wake.notify_all();
        }
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

/// `parallel_for` of the runtime's pool.
///
/// # Safety
/// `pool` is a `Pool`'s `threads().pool`, alive for the call.
unsafe extern "C" fn pool_parallel_for(pool: *mut c_void, n: usize, f: TaskFn, ctx: *mut c_void) {
    // SAFETY: caller contract.
    let s = unsafe { &*(pool as *const Shared) };
    let guard = match s.busy.try_lock() {
        Ok(g) => g,
        // Another thread's call (or this thread's, from inside a task) holds the pool:
        // these tasks run here, in order, as worker 0.
        Err(_) => {
            for task in 0..n {
                // SAFETY: the contract, with one worker.
                unsafe { f(ctx, task, 0) };
            }
            return;
        }
    };
    let p = &s.published;
    let mut task = 0;
    while task < n {
        let count = (n - task).min(MAX_TASKS);
        let generation = (p.call.load(Ordering::Relaxed) >> 32).wrapping_add(1) & 0xffff_ffff;
        // A task of this round runs `f(ctx, task0 + i)`: offset through a small context.
        struct Off {
            f: TaskFn,
            ctx: *mut c_void,
            base: usize,
        }
        unsafe extern "C" fn off(ctx: *mut c_void, i: usize, w: usize) {
            // SAFETY: ctx is the round's `Off`, alive until every task has returned.
            let o = unsafe { &*(ctx as *const Off) };
            // SAFETY: the caller's task function and context.
            unsafe { (o.f)(o.ctx, o.base + i, w) };
        }
        let o = Off { f, ctx, base: task };
        let (rf, rctx): (TaskFn, *mut c_void) = if task == 0 {
            (f, ctx)
        } else {
            (off, &o as *const Off as *mut c_void)
        };
        s.done.store(0, Ordering::Relaxed);
        p.f.store(rf as usize, Ordering::Relaxed);
        p.ctx.store(rctx as usize, Ordering::Relaxed);
        annotate::happens_before(&p.call);
        let c = call_word(generation, count);
        p.call.store(c, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        s.work(c, 0);
        while s.done.load(Ordering::Acquire) < count {
            std::hint::spin_loop();
        }
        annotate::happens_after(&*s.done);
        task += count;
    }
    drop(guard);
}

/// `onnxc_pool_create`: a pool of `threads` threads counting the caller's (`threads - 1`
/// are started); null when `threads` is 0 or a thread cannot be started.
#[unsafe(no_mangle)]
pub extern "C" fn onnxc_pool_create(threads: usize) -> *mut Pool {
    if threads == 0 {
        return std::ptr::null_mut();
    }
    match Pool::new(threads) {
        Ok(p) => Box::into_raw(Box::new(p)),
        Err(_) => std::ptr::null_mut(),
    }
}

/// `onnxc_pool_destroy`: stops and joins the pool's threads (null: nothing).
///
/// # Safety
/// `pool` is null or from `onnxc_pool_create`, not destroyed before, and no call runs on it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_pool_destroy(pool: *mut Pool) {
    if !pool.is_null() {
        // SAFETY: caller contract.
        drop(unsafe { Box::from_raw(pool) });
    }
}

/// `onnxc_pool_threads`: the pool's callback table, for `NAME_run_threaded`; valid while
/// the pool lives. A null pool gives a table with one worker (sequential runs).
///
/// # Safety
/// `pool` is null or a live pool from `onnxc_pool_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_pool_threads(pool: *const Pool) -> Threads {
    // SAFETY: caller contract.
    match unsafe { pool.as_ref() } {
        Some(p) => p.threads(),
        None => Threads {
            parallel_for: None,
            pool: std::ptr::null_mut(),
            workers: 1,
        },
    }
}

/// Thread tables for kernel tests: none (sequential), then pools of 2, 3 and 5 workers
/// (created once per test process). A kernel's test runs it with each and requires the same
/// bits.
#[cfg(test)]
pub(crate) fn test_threads() -> Vec<(usize, *const Threads)> {
    struct Pools(Vec<(Pool, Threads)>);
    // SAFETY: the pools and their tables are only read after creation.
    unsafe impl Sync for Pools {}
    // SAFETY: as above.
    unsafe impl Send for Pools {}
    static POOLS: std::sync::OnceLock<Pools> = std::sync::OnceLock::new();
    let pools = POOLS.get_or_init(|| {
        Pools(
            [2, 3, 5]
                .into_iter()
                .map(|w| {
                    let p = Pool::new(w).expect("test pool");
                    let t = p.threads();
                    (p, t)
                })
                .collect(),
        )
    });
    std::iter::once((1, std::ptr::null()))
        .chain(
            pools
                .0
                .iter()
                .map(|(_, t)| (t.workers, t as *const Threads)),
        )
        .collect()
}

/// Runs `f(workers, threads)` sequentially and on each test pool (`test_threads`) and
/// requires every run's result to have the sequential run's bits; returns that result.
/// `what` names the case in a failure.
#[cfg(test)]
pub(crate) fn same_bits_on_every_pool(
    what: &dyn std::fmt::Display,
    mut f: impl FnMut(usize, *const Threads) -> Vec<f32>,
) -> Vec<f32> {
    let mut first: Option<Vec<f32>> = None;
    for (workers, threads) in test_threads() {
        let y = f(workers, threads);
        match &first {
            None => first = Some(y),
            Some(want) => assert!(
                want.len() == y.len()
                    && want.iter().zip(&y).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{what}: {workers} threads differ from one"
            ),
        }
    }
    first.expect("the sequential run")
}

#[cfg(test)]
mod tests;
