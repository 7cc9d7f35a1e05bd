//! Behaviour of the graph allocator: in-place reuse, inputs, outputs, views, external tensors,
//! re-planning, several buffer types, chunked buffers and errors. Where memory is shared is
//! observed through the public API: bytes written through one tensor and read through another.

mod gallocr_support;

use gallocr_support::*;
use ggml::alloc::Gallocr;
use ggml::tensor::flags;
use ggml::{backend, BufferType, BufferUsage, Context, Status, Tensor, Type};

const N: i64 = 64;

fn cpu_buft() -> BufferType {
    backend::cpu_buffer_type()
}

/// Weights: two vectors of N in a buffer of their own, with fixed values.
fn weights() -> (Tensor, Tensor, ggml::Buffer) {
    let wctx = Context::init(1 << 20, true).unwrap();
    let w1 = wctx.new_tensor_1d(Type::F32, N).unwrap();
    let w2 = wctx.new_tensor_1d(Type::F32, N).unwrap();
    let buf = backend::alloc_ctx_tensors(&wctx, &backend::cpu_init().unwrap()).unwrap();
    let mut rng = Rng::new(99);
    w1.set_f32(&rng.values(N as usize, 0.5, 1.5)).unwrap();
    w2.set_f32(&rng.values(N as usize, -1.0, 1.0)).unwrap();
    (w1, w2, buf)
}

#[test]
fn gallocr_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Gallocr>();
}

#[test]
fn in_place_reuse_happens_exactly_when_allowed() {
    let (w, _, wbuf) = weights();
    let build = |ctx: &Context| {
        let a = ctx.new_tensor_1d(Type::F32, N).unwrap();
        a.set_input();
        let x1 = ctx.relu(&a).unwrap(); // sole use of a, UNARY: takes a over
        let x2 = ctx.sin(&x1).unwrap(); // SIN is never computed in place
        let x3 = ctx.neg(&x2).unwrap(); // x2 has two uses: not taken over
        let x4 = ctx.add(&w, &x3).unwrap(); // w is not the allocator's: takes x3 (operand 1)
        let x5 = ctx.mul(&x4, &x2).unwrap(); // takes x4
        let v = ctx.view_1d(&x5, N, 0).unwrap();
        let x6 = ctx.neg(&v).unwrap(); // v is a view: not taken over
        let s = ctx.sum(&x6).unwrap();
        let x7 = ctx.mul(&w, &s).unwrap(); // s has another layout, w is external: new memory
        x7.set_output();
        let x8 = ctx.relu(&x7).unwrap(); // x7 is an output: not taken over
        let named = [&x1, &x2, &x3, &x4, &x5, &v, &x6, &s, &x7, &x8];
        for (i, t) in named.into_iter().enumerate() {
            t.set_name(&format!("t{i}"));
        }
        (vec![a], vec![x7, x8])
    };
    let ctx = meta_ctx();
    let b = build_in(&ctx, &build);
    let galloc = Gallocr::new(&cpu_buft()).unwrap();
    galloc.alloc_graph(&b.graph).unwrap();
    let a = &b.inputs[0];
    let t: Vec<Tensor> = (0..10)
        .map(|i| b.graph.get_tensor(&format!("t{i}")).unwrap())
        .collect();
    let (x1, x2, x3, x4, x5, v, x6, s, x7, x8) = (
        &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6], &t[7], &t[8], &t[9],
    );
    assert!(same_memory(a, x1), "relu takes over its input");
    assert!(!overlaps(x1, x2), "sin is not in place");
    assert!(!overlaps(x2, x3), "an operand with two uses is kept");
    assert!(same_memory(x3, x4), "add takes over its second operand");
    assert!(same_memory(x4, x5), "mul takes over its first operand");
    assert!(same_memory(x5, v), "a view is its source's memory");
    assert!(!overlaps(x5, x6), "a view operand is not taken over");
    assert!(
        !overlaps(s, x7),
        "an operand of another layout is not taken over"
    );
    assert!(!overlaps(x7, x8), "an output is not taken over");
    assert_eq!(w.buffer().unwrap(), wbuf, "the weight stays where it was");
    for t in &t {
        assert_eq!(t.buffer().unwrap().get_usage(), BufferUsage::Compute);
    }

    // And the values are right.
    let values = input_values(&b, 1);
    assert_outputs(&compute(&b, &values), &reference(&build, &values));
}

#[test]
fn inputs_never_overlap_anything() {
    let build = |ctx: &Context| {
        let ins: Vec<Tensor> = (0..3)
            .map(|_| {
                let t = ctx.new_tensor_1d(Type::F32, N).unwrap();
                t.set_input();
                t
            })
            .collect();
        // A parameter is a node; flagged INPUT it is placed before any node.
        let p = ctx.new_tensor_1d(Type::F32, N).unwrap();
        p.set_param().unwrap();
        p.set_input();
        let mut h = ctx.relu(&ins[0]).unwrap();
        for k in 0..6 {
            h = if k % 2 == 0 { ctx.sin(&h) } else { ctx.cos(&h) }.unwrap();
        }
        let mut e = h;
        for t in ins.iter().chain([&p]) {
            e = ctx.add(&e, t).unwrap(); // e is taken over, never the input
        }
        ([ins, vec![p]].concat(), vec![e])
    };
    let ctx = meta_ctx();
    let b = build_in(&ctx, &build);
    let galloc = Gallocr::new(&cpu_buft()).unwrap();
    galloc.alloc_graph(&b.graph).unwrap();
    let nodes = b.graph.nodes();
    let others: Vec<&Tensor> = nodes.iter().filter(|t| !b.inputs.contains(t)).collect();
    for (i, x) in b.inputs.iter().enumerate() {
        for y in &b.inputs[i + 1..] {
            assert!(
                !overlaps(x, y),
                "inputs {:?} and {:?} overlap",
                x.name(),
                y.name()
            );
        }
        for y in &others {
            assert!(
                !overlaps(x, y),
                "input {:?} overlaps {:?}",
                x.name(),
                y.name()
            );
        }
    }
    let values = input_values(&b, 2);
    assert_outputs(&compute(&b, &values), &reference(&build, &values));
}

#[test]
fn outputs_survive_the_rest_of_the_graph() {
    let build = |ctx: &Context| {
        let a = ctx.new_tensor_1d(Type::F32, N).unwrap();
        a.set_input();
        let x = ctx.relu(&a).unwrap();
        let o1 = ctx.scale(&x, 3.0).unwrap();
        o1.set_output();
        let mut h = ctx.neg(&o1).unwrap();
        for k in 0..8 {
            h = match k % 3 {
                0 => ctx.sin(&h),
                1 => ctx.sqr(&h),
                _ => ctx.add(&h, &a),
            }
            .unwrap();
        }
        let o2 = ctx.cos(&h).unwrap();
        o2.set_output();
        let mut t = ctx.sin(&o2).unwrap();
        for _ in 0..6 {
            t = ctx.cos(&t).unwrap();
        }
        (vec![a], vec![o1, o2, t])
    };
    let ctx = meta_ctx();
    let b = build_in(&ctx, &build);
    let galloc = Gallocr::new(&cpu_buft()).unwrap();
    galloc.alloc_graph(&b.graph).unwrap();
    let values = input_values(&b, 3);
    // The outputs hold their values after the whole graph ran.
    assert_outputs(&compute(&b, &values), &reference(&build, &values));

    // Nothing computed after an output was placed on it.
    let nodes = b.graph.nodes();
    for o in &b.outputs[..2] {
        let at = nodes.iter().position(|n| n == o).unwrap();
        for later in &nodes[at + 1..] {
            assert!(
                !overlaps(o, later),
                "{:?} placed on output {:?}",
                later.name(),
                o.name()
            );
        }
    }
}

#[test]
fn a_live_view_keeps_its_source_alive() {
    // x is only used through the view v, which is only used by the last node; meanwhile a
    // chain of ops that are not in place allocates and frees memory of v's size.
    let build = |ctx: &Context| {
        let a = ctx.new_tensor_1d(Type::F32, 2 * N).unwrap();
        let b = ctx.new_tensor_1d(Type::F32, N).unwrap();
        a.set_input();
        b.set_input();
        let x = ctx.relu(&a).unwrap();
        let v = ctx.view_1d(&x, N, N as usize * 4).unwrap(); // the second half
        let mut y = ctx.sin(&b).unwrap();
        for k in 0..6 {
            y = if k % 2 == 0 { ctx.cos(&y) } else { ctx.sin(&y) }.unwrap();
        }
        let out = ctx.add(&y, &v).unwrap();
        (vec![a, b], vec![x, v, out])
    };
    let ctx = meta_ctx();
    let (inputs, outputs) = build(&ctx);
    // Order the graph so that x and v come first: v's consumer is last.
    let g = graph_of(&[&outputs[1], &outputs[2]]);
    let nodes = g.nodes();
    assert_eq!(&nodes[..2], &outputs[..2]);
    let b = Built {
        inputs,
        outputs: vec![outputs[2].clone()],
        graph: g,
    };
    let galloc = Gallocr::new(&cpu_buft()).unwrap();
    galloc.alloc_graph(&b.graph).unwrap();
    let values = input_values(&b, 4);
    let got = compute(&b, &values);
    let want = reference(
        &|c: &Context| {
            let (i, o) = build(c);
            (i, vec![o[2].clone()])
        },
        &values,
    );
    assert_outputs(&got, &want);
    let x = &outputs[0];
    for t in &nodes[2..nodes.len() - 1] {
        assert!(
            !overlaps(x, t),
            "{:?} placed on x while its view was alive",
            t.name()
        );
    }
}

#[test]
fn weights_in_another_buffer_are_left_alone() {
    let (w1, w2, wbuf) = weights();
    let (w1v, w2v) = (w1.get_f32().unwrap(), w2.get_f32().unwrap());
    let ctx = meta_ctx();
    let a = ctx.new_tensor_1d(Type::F32, N).unwrap();
    a.set_input();
    let out = ctx
        .relu(&ctx.add(&ctx.mul(&a, &w1).unwrap(), &w2).unwrap())
        .unwrap();
    let g = graph_of(&[&out]);
    let galloc = Gallocr::new(&cpu_buft()).unwrap();
    galloc.alloc_graph(&g).unwrap();
    assert_eq!(w1.buffer().unwrap(), wbuf);
    assert_eq!(w2.buffer().unwrap(), wbuf);
    let nodes = g.nodes();
    for t in nodes.iter().chain([&a]) {
        assert_ne!(
            t.buffer().unwrap(),
            wbuf,
            "{:?} placed in the weights' buffer",
            t.name()
        );
    }
    // Only a needs memory besides the nodes, which all run in a's memory.
    assert_eq!(galloc.get_buffer_size(0), N as usize * 4);

    let va: Vec<f32> = Rng::new(5).values(N as usize, -2.0, 2.0);
    a.set_f32(&va).unwrap();
    backend::cpu_init().unwrap().graph_compute(&g).unwrap();
    let want: Vec<f32> = (0..N as usize)
        .map(|i| (va[i] * w1v[i] + w2v[i]).max(0.0))
        .collect();
    assert_same_values("out", &out.get_f32().unwrap(), &want);
    assert_eq!(w1.get_f32().unwrap(), w1v);
    assert_eq!(w2.get_f32().unwrap(), w2v);
}

/// a (INPUT) and a chain of `len` ops of n elements, mixing in-place and other ops.
fn chain(ctx: &Context, n: i64, len: usize) -> (Vec<Tensor>, Vec<Tensor>) {
    let a = ctx.new_tensor_1d(Type::F32, n).unwrap();
    a.set_input();
    let mut x = a.clone();
    for k in 0..len {
        x = match k % 3 {
            0 => ctx.sin(&x),
            1 => ctx.scale(&x, 1.5),
            _ => ctx.add(&x, &a),
        }
        .unwrap();
    }
    (vec![a], vec![x])
}

#[test]
fn a_graph_that_grows_is_planned_again() {
    let galloc = Gallocr::new(&cpu_buft()).unwrap();
    let run = |n: i64, len: usize| {
        let ctx = meta_ctx();
        let b = build_in(&ctx, &move |c: &Context| chain(c, n, len));
        galloc.alloc_graph(&b.graph).unwrap();
        let values = input_values(&b, n as u64 + len as u64);
        let want = reference(&move |c: &Context| chain(c, n, len), &values);
        assert_outputs(&compute(&b, &values), &want);
        (b.outputs[0].buffer().unwrap(), galloc.get_buffer_size(0))
    };
    let (buf1, size1) = run(1024, 6);
    assert_eq!(
        size1,
        3 * 4096,
        "a, one chain tensor and the sin result next to it"
    );
    // Same shape again, fresh tensors: placed in the same buffer.
    let (buf2, size2) = run(1024, 6);
    assert_eq!((buf2.clone(), size2), (buf1.clone(), size1));
    // Larger tensors: planned again in a larger buffer.
    let (buf3, size3) = run(4096, 6);
    assert_ne!(buf3, buf1);
    assert_eq!(size3, 4 * size1);
    // More nodes, smaller tensors: planned again, and the buffer is large enough.
    let (buf4, size4) = run(1024, 9);
    assert_eq!((buf4, size4), (buf3, size3));
}

#[test]
fn alloc_graph_twice_leaves_placed_tensors_alone() {
    let ctx = meta_ctx();
    let b = build_in(&ctx, &|c: &Context| chain(c, N, 5));
    let galloc = Gallocr::new(&cpu_buft()).unwrap();
    galloc.alloc_graph(&b.graph).unwrap();
    let values = input_values(&b, 6);
    let first = compute(&b, &values);
    galloc.alloc_graph(&b.graph).unwrap();
    assert_outputs(
        &b.outputs
            .iter()
            .map(|t| t.get_f32().unwrap())
            .collect::<Vec<_>>(),
        &first,
    );
}

/// Two buffer ids: leafs and nodes go to the id they are given. Only ops that are never
/// computed in place, so every tensor keeps its own id.
fn two_way(ctx: &Context) -> (Vec<Tensor>, Vec<Tensor>) {
    let a = ctx.new_tensor_2d(Type::F32, N, 2).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, N, 2).unwrap();
    a.set_input();
    b.set_input();
    let x = ctx.sin(&a).unwrap();
    let y = ctx.cos(&b).unwrap();
    let z = ctx.sin(&y).unwrap();
    let u = ctx.cos(&x).unwrap();
    let c = ctx.concat(&z, &u, 1).unwrap();
    let s = ctx.sum_rows(&c).unwrap();
    (vec![a, b], vec![s])
}

#[test]
fn several_buffer_types_place_tensors_by_id() {
    let (ba, count_a) = test_buft("A", usize::MAX);
    let (bb, count_b) = test_buft("B", usize::MAX);
    let bufts = [ba.clone(), bb.clone()];
    let galloc = Gallocr::new_n(&bufts).unwrap();
    let ctx = meta_ctx();
    let b = build_in(&ctx, &two_way);
    let nodes = b.graph.nodes();
    let leafs = b.graph.leafs();
    let node_ids: Vec<usize> = (0..nodes.len()).map(|i| i % 2).collect();
    let leaf_ids: Vec<usize> = (0..leafs.len()).map(|i| 1 - i % 2).collect();

    // Ids are checked.
    let e = galloc
        .reserve_n(&b.graph, Some(&node_ids[1..]), None)
        .unwrap_err();
    assert!(e.to_string().contains("node_buffer_ids has"), "{e}");
    let mut bad = leaf_ids.clone();
    bad[1] = 2;
    let e = galloc
        .reserve_n(&b.graph, Some(&node_ids), Some(&bad))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("leaf_buffer_ids[1] = 2 is out of range"),
        "{e}"
    );

    galloc
        .reserve_n(&b.graph, Some(&node_ids), Some(&leaf_ids))
        .unwrap();
    galloc.alloc_graph(&b.graph).unwrap();
    for (t, &id) in nodes
        .iter()
        .zip(&node_ids)
        .chain(leafs.iter().zip(&leaf_ids))
    {
        assert_eq!(t.buffer().unwrap().get_type(), bufts[id], "{:?}", t.name());
        assert_eq!(t.buffer().unwrap().get_usage(), BufferUsage::Compute);
    }
    assert!(galloc.get_buffer_size(0) > 0 && galloc.get_buffer_size(1) > 0);
    assert_eq!(
        (
            count_a.load(std::sync::atomic::Ordering::SeqCst),
            count_b.load(std::sync::atomic::Ordering::SeqCst)
        ),
        (1, 1)
    );
    let values = input_values(&b, 8);
    assert_outputs(&compute(&b, &values), &reference(&two_way, &values));

    // Another graph does not match the plan: with several ids that is the caller's to fix.
    let other = build_in(&ctx, &|c: &Context| chain(c, N, 3));
    let e = galloc.alloc_graph(&other.graph).unwrap_err();
    assert!(e.to_string().contains("call reserve_n"), "{e}");
    assert!(!other.outputs[0].is_allocated());
}

#[test]
fn repeated_buffer_types_share_one_buffer() {
    let (ba, count) = test_buft("A", usize::MAX);
    let galloc = Gallocr::new_n(&[ba.clone(), ba.clone()]).unwrap();
    let ctx = meta_ctx();
    let b = build_in(&ctx, &two_way);
    let nodes = b.graph.nodes();
    let node_ids: Vec<usize> = (0..nodes.len()).map(|i| i % 2).collect();
    let sizes = galloc
        .reserve_n_size(&b.graph, Some(&node_ids), None)
        .unwrap();
    assert_eq!(sizes[0], sizes[1], "both ids report the shared size");
    assert_eq!(
        count.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "only planned"
    );
    galloc.reserve_n(&b.graph, Some(&node_ids), None).unwrap();
    galloc.alloc_graph(&b.graph).unwrap();
    assert_eq!(galloc.get_buffer_size(0), sizes[0]);
    assert_eq!(
        galloc.get_buffer_size(1),
        0,
        "counted once, under the first id"
    );
    let buf = nodes[0].buffer().unwrap();
    for t in nodes.iter().chain(&b.graph.leafs()) {
        assert_eq!(t.buffer().unwrap(), buf);
    }
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn a_small_max_size_splits_the_compute_buffer_into_chunks() {
    const MAX: usize = 64 << 10;
    const M: i64 = 4096; // 16 KiB
    let build = |ctx: &Context| {
        // Six inputs live until the end: 96 KiB at once.
        let ins: Vec<Tensor> = (0..6)
            .map(|_| {
                let t = ctx.new_tensor_1d(Type::F32, M).unwrap();
                t.set_input();
                t
            })
            .collect();
        let mut e = ctx.sin(&ins[0]).unwrap();
        for t in &ins {
            e = ctx.add(&e, t).unwrap();
        }
        e.set_output();
        // One tensor larger than the maximum: a chunk of its own.
        let big = ctx.new_tensor_1d(Type::F32, 8 * M).unwrap();
        let r = ctx.repeat(&e, &big).unwrap();
        let s = ctx.sum(&r).unwrap();
        (ins, vec![e, s])
    };
    let (bt, _) = test_buft("small", MAX);
    let galloc = Gallocr::new(&bt).unwrap();
    let ctx = meta_ctx();
    let b = build_in(&ctx, &build);
    galloc.alloc_graph(&b.graph).unwrap();

    let all: Vec<Tensor> = b.graph.nodes().into_iter().chain(b.graph.leafs()).collect();
    let mut bufs: Vec<ggml::Buffer> = Vec::new();
    for t in &all {
        let buf = t.buffer().unwrap();
        assert_eq!(buf.get_usage(), BufferUsage::Compute);
        if !bufs.contains(&buf) {
            bufs.push(buf);
        }
    }
    assert!(bufs.len() >= 3, "{} chunk buffers", bufs.len());
    let big_chunks: Vec<usize> = bufs
        .iter()
        .map(|b| b.get_size())
        .filter(|&s| s > MAX)
        .collect();
    assert_eq!(
        big_chunks,
        vec![8 * M as usize * 4],
        "only the large tensor's chunk is larger"
    );
    assert_eq!(
        galloc.get_buffer_size(0),
        bufs.iter().map(|b| b.get_size()).sum::<usize>()
    );
    let values = input_values(&b, 9);
    assert_outputs(&compute(&b, &values), &reference(&build, &values));
}

#[test]
fn reserve_n_size_only_plans() {
    let (bt, count) = test_buft("A", usize::MAX);
    let galloc = Gallocr::new(&bt).unwrap();
    let ctx = meta_ctx();
    let b = build_in(&ctx, &|c: &Context| chain(c, N, 7));
    let sizes = galloc.reserve_n_size(&b.graph, None, None).unwrap();
    assert_eq!(sizes, vec![3 * N as usize * 4]);
    assert_eq!(galloc.get_buffer_size(0), 0);
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 0);
    // alloc_graph finds no buffer for the plan and, with one buffer type, reserves.
    galloc.alloc_graph(&b.graph).unwrap();
    assert_eq!(galloc.get_buffer_size(0), sizes[0]);
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
    // Planning again keeps buffers that are large enough.
    let b2 = build_in(&ctx, &|c: &Context| chain(c, N, 7));
    assert_eq!(galloc.reserve_n_size(&b2.graph, None, None).unwrap(), sizes);
    assert_eq!(galloc.get_buffer_size(0), sizes[0]);
}

#[test]
fn nodes_without_the_compute_flag_still_get_memory() {
    // As in GGML, the allocator does not look at the flag: such a node is placed and keeps
    // its operands alive; executors skip it.
    let ctx = meta_ctx();
    let a = ctx.new_tensor_1d(Type::F32, N).unwrap();
    let x = ctx.sin(&a).unwrap();
    let y = ctx.cos(&x).unwrap();
    let skipped = ctx.sin(&x).unwrap();
    let g = graph_of(&[&y]);
    g.add_node(&skipped).unwrap();
    assert_eq!(skipped.flags() & flags::COMPUTE, 0);
    let galloc = Gallocr::new(&cpu_buft()).unwrap();
    galloc.alloc_graph(&g).unwrap();
    assert!(skipped.is_allocated());
    assert!(!overlaps(&x, &y), "x is still needed by the skipped node");
    assert!(!overlaps(&x, &skipped));
}

#[test]
fn errors_are_reported() {
    assert!(Gallocr::new_n(&[]).is_err());

    // A buffer type that cannot allocate.
    let mut refusing = TestBuft::new("refusing", usize::MAX);
    refusing.fail = true;
    let galloc = Gallocr::new(&BufferType::new(refusing)).unwrap();
    let ctx = meta_ctx();
    let b = build_in(&ctx, &|c: &Context| chain(c, N, 3));
    let e = galloc.reserve(&b.graph).unwrap_err();
    assert_eq!(e.status(), Status::AllocFailed);
    assert!(e.to_string().contains("refusing"), "{e}");
    let e = galloc.alloc_graph(&b.graph).unwrap_err();
    assert_eq!(e.status(), Status::AllocFailed);
    assert!(b.graph.nodes().iter().all(|t| !t.is_allocated()));
    assert_eq!(galloc.get_buffer_size(0), 0);
    assert_eq!(
        galloc.get_buffer_size(7),
        0,
        "an id out of range has no buffer"
    );

    // A view of a tensor that is neither in the graph nor allocated: the plan cannot cover it;
    // what was placed is unplaced again.
    let hidden = ctx.new_tensor_1d(Type::F32, N).unwrap();
    let v = ctx.view_tensor(&hidden).unwrap();
    let y = ctx.sin(&v).unwrap();
    let g = graph_of(&[&y]);
    assert_eq!(g.leafs(), vec![v.clone()]);
    let galloc = Gallocr::new(&cpu_buft()).unwrap();
    let e = galloc.alloc_graph(&g).unwrap_err();
    assert!(e.to_string().contains("no memory"), "{e}");
    assert!(!y.is_allocated());
}

#[test]
fn free_releases_the_compute_buffers() {
    let ctx = meta_ctx();
    let b = build_in(&ctx, &|c: &Context| chain(c, N, 3));
    let galloc = Gallocr::new(&cpu_buft()).unwrap();
    galloc.alloc_graph(&b.graph).unwrap();
    let buf = b.outputs[0].buffer().unwrap();
    galloc.free();
    assert!(buf.is_freed());
    assert!(b.outputs[0].get_f32().is_err());
}
