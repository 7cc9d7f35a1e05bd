//! Soundness under stress: several threads share two CPU streams and one buffer, queue
//! transfers, computations and copies concurrently, and read results both from the host and
//! asynchronously; every value is checked. The rounds repeat a few hundred times (the count
//! can be changed with `GGML_STRESS_ROUNDS`) under a watchdog, so a deadlock fails the test
//! instead of hanging it.

mod common_backend;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use common_backend::{assert_close, bytes_f32, f32_bytes, input, relu_mul_add_ref};
use ggml::backend::{self, alloc_ctx_tensors};
use ggml::{Backend, Context, Graph, Tensor, Type};

const N: usize = 96;
const THREADS: usize = 4;
const ITERS: usize = 6;
const TOL: f64 = 1e-6;

/// One worker's tensors: its input, its result `relu(x) * w + x`, a copy target, the graph.
struct Lane {
    x: Tensor,
    y: Tensor,
    z: Tensor,
    g: Graph,
}

fn lane_work(lane: &Lane, streams: &[Backend; 2], wv: &[f32], t: usize, round: usize) {
    for k in 0..ITERS {
        let xv = input(N, (round * 1000 + t * 100 + k) as u32);
        let want = relu_mul_add_ref(&xv, wv);
        let (s, other) = (&streams[(t + k) % 2], &streams[(t + k + 1) % 2]);
        // write: from the host, or queued on the stream that computes
        if k % 2 == 0 {
            lane.x.set_f32(&xv).unwrap();
        } else {
            s.tensor_set_async(&lane.x, f32_bytes(&xv), 0).unwrap();
        }
        s.graph_compute_async(&lane.g).unwrap();
        // read: from the host (waits for the queued work), or queued on the same stream
        match k % 3 {
            0 => assert_close(&lane.y.get_f32().unwrap(), &want, TOL),
            1 => {
                let got = s.tensor_get_async(&lane.y, 0, N * 4).unwrap();
                assert_close(&bytes_f32(&got.wait().unwrap()), &want, TOL);
            }
            _ => {
                // copied to the other stream after this one's work, read there
                backend::tensor_copy_async(s, other, &lane.y, &lane.z).unwrap();
                let got = other.tensor_get_async(&lane.z, 0, N * 4).unwrap();
                assert_close(&bytes_f32(&got.wait().unwrap()), &want, TOL);
            }
        }
    }
}

fn one_round(round: usize) {
    let streams = [backend::cpu_init().unwrap(), backend::cpu_init().unwrap()];
    let ctx = Context::init(1 << 20, true).unwrap();
    let w = ctx.new_tensor_1d(Type::F32, N as i64).unwrap();
    let lanes: Vec<Lane> = (0..THREADS)
        .map(|_| {
            let x = ctx.new_tensor_1d(Type::F32, N as i64).unwrap();
            let r = ctx.relu(&x).unwrap();
            let m = ctx.mul(&r, &w).unwrap();
            let y = ctx.add(&m, &x).unwrap();
            let z = ctx.dup_tensor(&y).unwrap();
            let g = ctx.build_forward_expand(&y).unwrap();
            Lane { x, y, z, g }
        })
        .collect();
    // one buffer shared by every lane and the weight
    let buf = alloc_ctx_tensors(&ctx, &streams[0]).unwrap();
    let wv = input(N, 7 + round as u32);
    w.set_f32(&wv).unwrap();

    std::thread::scope(|scope| {
        for (t, lane) in lanes.iter().enumerate() {
            let (streams, wv) = (&streams, &wv);
            scope.spawn(move || lane_work(lane, streams, wv, t, round));
        }
        // and a reader of the shared weight, from the host and from both streams
        scope.spawn(|| {
            for k in 0..ITERS {
                assert_eq!(w.get_f32().unwrap(), wv);
                let got = streams[k % 2].tensor_get_async(&w, 0, N * 4).unwrap();
                assert_eq!(bytes_f32(&got.wait().unwrap()), wv);
            }
        });
    });
    for s in &streams {
        s.synchronize().unwrap();
        assert_eq!(s.n_pending(), 0);
    }
    if round % 2 == 0 {
        // free with nothing queued, then drop the streams
        buf.free();
    } else {
        // drop the streams with work queued: they finish it first
        for lane in &lanes {
            streams[round % 2].graph_compute_async(&lane.g).unwrap();
        }
        drop(streams);
        assert_eq!(w.get_f32().unwrap(), wv);
    }
}

#[test]
fn threads_sharing_streams_and_a_buffer_stay_correct_and_never_deadlock() {
    let rounds: usize = std::env::var("GGML_STRESS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    std::thread::spawn(move || {
        for round in 0..rounds {
            one_round(round);
            tx.send(round).unwrap();
        }
    });
    for expected in 0..rounds {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(round) => assert_eq!(round, expected),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("round {expected} did not finish within 60 s: deadlock suspected")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic!("round {expected} failed (see the worker's panic above)")
            }
        }
    }
    eprintln!("{rounds} rounds in {:.2?}", start.elapsed());
}
