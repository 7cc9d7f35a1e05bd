//! The sequence-model family: SSM_CONV and SSM_SCAN (Mamba-1 and Mamba-2, with state
//! snapshots), RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7 and GATED_DELTA_NET (GGML's
//! `test_ssm_conv`, `test_ssm_scan`, `test_rwkv_wkv6`, `test_gla`, `test_rwkv_wkv7`,
//! `test_gated_delta_net`). References: the recurrences token by token in f64, states as
//! plain `S × S` matrices per head.

use std::sync::Arc;

use ggml::Type;

use crate::case::{Case, Init, Input, Layout, Vars};
use crate::host::{shape, Host};
use crate::rng::Rng;

const F32: Type = Type::F32;

fn ssm_conv(out: &mut Vec<Case>) {
    // (d_conv, d_inner, n_t, n_s)
    for (d_conv, d_inner, n_t, n_s) in [(4, 8, 5, 2), (3, 7, 1, 1), (4, 1536, 4, 1), (2, 5, 9, 3)] {
        let sx = [d_conv - 1 + n_t, d_inner, n_s];
        let c = [d_conv, d_inner];
        out.push(Case::new(
            "SSM_CONV",
            Vars::new()
                .ty("type", F32)
                .list("ne_a", &sx)
                .list("ne_b", &c),
            vec![Input::new(F32, &sx), Input::new(F32, &c)],
            |ctx, x| ctx.ssm_conv(&x[0], &x[1]),
            move |x| {
                let (sx, c) = (&x[0], &x[1]);
                Host::from_fn(shape(&[d_inner, n_t, n_s]), |i| {
                    (0..d_conv as usize)
                        .map(|j| sx.at([i[1] + j, i[0], i[2], 0, 0]) * c.at([j, i[0], 0, 0, 0]))
                        .sum()
                })
            },
        ));
    }
}

/// `ln(1 + eˣ)`, or `x` above 20 (GGML's softplus).
fn softplus(x: f64) -> f64 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// The SSM_SCAN result: `y` (shaped as `x`), then `k` blocks of the states.
fn ssm_scan_ref(x: &[Host], k: usize) -> Host {
    let (s0, xs, dt, a, b, c, ids) = (&x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6]);
    let (d_state, head_dim, n_head) = (s0.ne[0], s0.ne[1], s0.ne[2]);
    let (n_t, n_seqs, n_group) = (xs.ne[2], xs.ne[3], b.ne[1]);
    let state_len = d_state * head_dim * n_head;
    let y_len = head_dim * n_head * n_t * n_seqs;
    let mut v = vec![f64::NAN; y_len + k * state_len * n_seqs];
    for q in 0..n_seqs {
        let id = ids.v[q] as usize;
        let mut st: Vec<f64> = (0..state_len)
            .map(|e| {
                s0.at([
                    e % d_state,
                    e / d_state % head_dim,
                    e / (d_state * head_dim),
                    id,
                    0,
                ])
            })
            .collect();
        for t in 0..n_t {
            for h in 0..n_head {
                let g = h / (n_head / n_group);
                let delta = softplus(dt.at([h, t, q, 0, 0]));
                for i in 0..head_dim {
                    let xv = xs.at([i, h, t, q, 0]);
                    let mut y = 0.0;
                    for n in 0..d_state {
                        let av = if a.ne[0] == 1 {
                            a.at([0, h, 0, 0, 0])
                        } else {
                            a.at([n, h, 0, 0, 0])
                        };
                        let e = n + d_state * (i + head_dim * h);
                        st[e] = st[e] * (delta * av).exp() + b.at([n, g, t, q, 0]) * xv * delta;
                        y += st[e] * c.at([n, g, t, q, 0]);
                    }
                    v[i + head_dim * (h + n_head * (t + n_t * q))] = y;
                }
            }
            let slot = n_t - 1 - t;
            if slot < k {
                let at = y_len + (slot * n_seqs + q) * state_len;
                v[at..at + state_len].copy_from_slice(&st);
            }
        }
    }
    Host {
        ne: shape(&[v.len() as i64]),
        v,
    }
}

fn ssm_scan(out: &mut Vec<Case>) {
    // (d_state, head_dim, n_head, n_group, n_t, n_seqs, Mamba-2, K)
    let grid = [
        (16i64, 1i64, 96i64, 1i64, 9i64, 2i64, false, 1i64),
        (16, 5, 3, 1, 7, 2, false, 1),
        (128, 16, 4, 2, 8, 2, true, 1),
        (64, 16, 2, 2, 6, 3, true, 1),
        (16, 4, 4, 2, 5, 2, true, 3),
        (7, 3, 6, 3, 4, 1, true, 4),
    ];
    for (ds, hd, nh, ng, nt, ns, mamba2, k) in grid {
        let n_rs = ns + 1;
        let a_ne = [if mamba2 { 1 } else { ds }, nh];
        // Sequence q starts from state ids[q]: a permutation of the states, one left out.
        let ids = Init::Custom(Arc::new(move |_: &mut Rng, i| {
            ((i[0] + 1) % n_rs as usize) as f64
        }));
        let inputs = vec![
            Input::new(F32, &[ds, hd, nh, n_rs]),
            Input::new(F32, &[hd, nh, nt, ns]),
            Input::new(F32, &[nh, nt, ns]).uniform(-3.0, 1.0),
            Input::new(F32, &a_ne).uniform(-1.5, -0.1),
            Input::new(F32, &[ds, ng, nt, ns]),
            Input::new(F32, &[ds, ng, nt, ns]),
            Input::new(Type::I32, &[ns]).init(ids),
        ];
        out.push(Case::new(
            "SSM_SCAN",
            Vars::new()
                .ty("type", F32)
                .val("d_state", ds)
                .val("head_dim", hd)
                .val("n_head", nh)
                .val("n_group", ng)
                .val("n_seq_tokens", nt)
                .val("n_seqs", ns)
                .val("K", k),
            inputs,
            move |ctx, x| ctx.ssm_scan(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6], k),
            move |x| ssm_scan_ref(x, k as usize),
        ));
    }
}

/// Which of the three RWKV-style recurrences.
#[derive(Clone, Copy, PartialEq)]
enum Rec {
    Wkv6,
    Gla(f64),
    Wkv7,
}

/// The recurrence over `T / n_seqs` tokens per sequence; `x` in the builder's operand order,
/// the state last. Result `[S·H, T + S·n_seqs]`: outputs, then final states
/// (`state[h·S² + i·S + j]`).
fn rec_ref(rec: Rec, x: &[Host]) -> Host {
    let (s, h_n, t_n) = (x[0].ne[0], x[0].ne[1], x[0].ne[2]);
    let state = x.last().unwrap();
    let n_seqs = state.ne[1];
    let per = t_n / n_seqs;
    let c = s * h_n;
    let mut v = vec![0.0; c * (t_n + s * n_seqs)];
    let tok = |m: usize, e: usize, h: usize, t: usize| x[m].at([e, h, t, 0, 0]);
    for q in 0..n_seqs {
        for h in 0..h_n {
            let mut st: Vec<f64> = (0..s * s)
                .map(|e| state.at([h * s * s + e, q, 0, 0, 0]))
                .collect();
            for t in q * per..(q + 1) * per {
                let mut o = vec![0.0; s];
                match rec {
                    Rec::Wkv6 => {
                        // k, v, r, time_first, time_decay
                        for i in 0..s {
                            let (k, r) = (tok(0, i, h, t), tok(2, i, h, t));
                            let tf = x[3].v[h * s + i];
                            let td = tok(4, i, h, t);
                            for j in 0..s {
                                let kv = k * tok(1, j, h, t);
                                o[j] += r * (tf * kv + st[i * s + j]);
                                st[i * s + j] = st[i * s + j] * td + kv;
                            }
                        }
                    }
                    Rec::Gla(scale) => {
                        // k, v, q, g
                        for i in 0..s {
                            let (k, qv, g) = (tok(0, i, h, t), tok(2, i, h, t), tok(3, i, h, t));
                            for j in 0..s {
                                st[i * s + j] = st[i * s + j] * g + k * tok(1, j, h, t);
                                o[j] += st[i * s + j] * qv * scale;
                            }
                        }
                    }
                    Rec::Wkv7 => {
                        // r, w, k, v, a, b
                        for (i, oi) in o.iter_mut().enumerate() {
                            let sa: f64 = (0..s).map(|j| tok(4, j, h, t) * st[i * s + j]).sum();
                            for j in 0..s {
                                let e = i * s + j;
                                st[e] = st[e] * tok(1, j, h, t)
                                    + tok(3, i, h, t) * tok(2, j, h, t)
                                    + sa * tok(5, j, h, t);
                                *oi += st[e] * tok(0, j, h, t);
                            }
                        }
                    }
                }
                v[t * c + h * s..t * c + h * s + s].copy_from_slice(&o);
            }
            let at = t_n * c + q * s * c + h * s * s;
            v[at..at + s * s].copy_from_slice(&st);
        }
    }
    Host {
        ne: shape(&[c as i64, (t_n + s * n_seqs) as i64]),
        v,
    }
}

fn rwkv(out: &mut Vec<Case>) {
    // (head_size, heads, tokens per sequence, sequences)
    let grid: [(i64, i64, i64, i64); 4] =
        [(32, 2, 32, 1), (32, 3, 5, 4), (64, 1, 3, 2), (7, 3, 4, 2)];
    for (s, h, per, n_seqs) in grid {
        let t = per * n_seqs;
        let tok = [s, h, t];
        let state = [s * s * h, n_seqs];
        let vars = Vars::new()
            .ty("type", F32)
            .val("head_count", h)
            .val("head_size", s)
            .val("n_seq_tokens", per)
            .val("n_seqs", n_seqs);
        // Decays in (0, 1) as the models make them.
        let decay = || Input::new(F32, &tok).uniform(0.5, 1.0);
        out.push(Case::new(
            "RWKV_WKV6",
            vars.clone(),
            vec![
                Input::new(F32, &tok),
                Input::new(F32, &tok),
                Input::new(F32, &tok),
                Input::new(F32, &[s, h]),
                decay(),
                Input::new(F32, &state),
            ],
            |ctx, x| ctx.rwkv_wkv6(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]),
            |x| rec_ref(Rec::Wkv6, x),
        ));
        let scale = 1.0 / (s as f32).sqrt();
        out.push(Case::new(
            "GATED_LINEAR_ATTN",
            vars.clone().float("scale", scale),
            vec![
                Input::new(F32, &tok),
                Input::new(F32, &tok),
                Input::new(F32, &tok),
                decay(),
                Input::new(F32, &state),
            ],
            move |ctx, x| ctx.gated_linear_attn(&x[0], &x[1], &x[2], &x[3], &x[4], scale),
            move |x| rec_ref(Rec::Gla(scale as f64), x),
        ));
        // RWKV-7: a = −κ̂, b = κ̂·α with κ̂ a unit vector per head keep the state bounded.
        let small = || Input::new(F32, &tok).uniform(-0.3, 0.3);
        out.push(Case::new(
            "RWKV_WKV7",
            vars,
            vec![
                Input::new(F32, &tok),
                decay(),
                Input::new(F32, &tok),
                Input::new(F32, &tok),
                small(),
                small(),
                Input::new(F32, &state),
            ],
            |ctx, x| ctx.rwkv_wkv7(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6]),
            |x| rec_ref(Rec::Wkv7, x),
        ));
    }
}

/// GATED_DELTA_NET: outputs `[S·H, T·n_seqs]` (row `seq·T + t`), then `K` state slots, each
/// `[S·S·H, n_seqs]` with `M[j][i]` at `i + S·j` (slot `j` the state `j` tokens before the
/// end).
fn gdn_ref(x: &[Host], k_slots: usize) -> Host {
    let (q, k, v, g, beta, state) = (&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]);
    let (s, h_n, t_n, n_seqs) = (v.ne[0], v.ne[1], v.ne[2], v.ne[3]);
    let attn = s * h_n * t_n * n_seqs;
    let snap = s * s * h_n * n_seqs;
    let mut out = vec![f64::NAN; attn + k_slots * snap];
    let scale = 1.0 / (s as f64).sqrt();
    for seq in 0..n_seqs {
        let (qs, ks) = (seq / (n_seqs / q.ne[3]), seq / (n_seqs / k.ne[3]));
        for h in 0..h_n {
            let (qh, kh) = (h % q.ne[1], h % k.ne[1]);
            // m[j][i] = state[i, j, h, seq]
            let mut m: Vec<Vec<f64>> = (0..s)
                .map(|j| (0..s).map(|i| state.at([i, j, h, seq, 0])).collect())
                .collect();
            for t in 0..t_n {
                for row in m.iter_mut() {
                    for (i, mji) in row.iter_mut().enumerate() {
                        let gi = if g.ne[0] == 1 { 0 } else { i };
                        *mji *= g.at([gi, h, t, seq, 0]).exp();
                    }
                }
                let b = beta.at([0, h, t, seq, 0]);
                let kv: Vec<f64> = (0..s).map(|i| k.at([i, kh, t, ks, 0])).collect();
                let delta: Vec<f64> = (0..s)
                    .map(|j| {
                        let sum: f64 = (0..s).map(|i| m[j][i] * kv[i]).sum();
                        (v.at([j, h, t, seq, 0]) - sum) * b
                    })
                    .collect();
                for j in 0..s {
                    for i in 0..s {
                        m[j][i] += kv[i] * delta[j];
                    }
                }
                for (j, row) in m.iter().enumerate() {
                    let sum: f64 = (0..s).map(|i| row[i] * q.at([i, qh, t, qs, 0])).sum();
                    out[((seq * t_n + t) * h_n + h) * s + j] = sum * scale;
                }
                let slot = t_n - 1 - t;
                if slot < k_slots {
                    let at = attn + slot * snap + (seq * h_n + h) * s * s;
                    for (j, row) in m.iter().enumerate() {
                        out[at + j * s..at + j * s + s].copy_from_slice(row);
                    }
                }
            }
        }
    }
    Host {
        ne: shape(&[(s * h_n) as i64, (out.len() / (s * h_n)) as i64]),
        v: out,
    }
}

fn gated_delta_net(out: &mut Vec<Case>) {
    // (S, H, T, n_seqs, q/k heads, q/k sequences, per-element gate, K, q/k padded)
    let grid = [
        (16i64, 2i64, 4i64, 1i64, 2i64, 1i64, false, 1i64, false),
        (32, 4, 3, 2, 4, 2, true, 1, false),
        (8, 4, 5, 2, 2, 1, false, 1, false),
        (7, 3, 6, 3, 1, 3, true, 1, true),
        (16, 2, 5, 2, 2, 2, false, 3, false),
        (5, 2, 4, 1, 2, 1, true, 4, true),
        (64, 1, 2, 1, 1, 1, false, 1, false),
    ];
    for (s, h, t, ns, hq, nq, kda, k, padded) in grid {
        let layout = if padded {
            Layout::Padded
        } else {
            Layout::Contiguous
        };
        let gate = [if kda { s } else { 1 }, h, t, ns];
        out.push(Case::new(
            "GATED_DELTA_NET",
            Vars::new()
                .ty("type", F32)
                .val("head_count", h)
                .val("head_size", s)
                .val("n_seq_tokens", t)
                .val("n_seqs", ns)
                .list("ne_qk", &[s, hq, t, nq])
                .flag("kda", kda)
                .val("K", k)
                .flag("v", padded),
            vec![
                Input::new(F32, &[s, hq, t, nq])
                    .layout(layout)
                    .uniform(-0.5, 0.5),
                Input::new(F32, &[s, hq, t, nq])
                    .layout(layout)
                    .uniform(-0.5, 0.5),
                Input::new(F32, &[s, h, t, ns]),
                Input::new(F32, &gate).uniform(-0.5, 0.0),
                Input::new(F32, &[1, h, t, ns]).uniform(0.0, 1.0),
                Input::new(F32, &[s, s, h, ns]).uniform(-0.5, 0.5),
            ],
            move |ctx, x| ctx.gated_delta_net(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5], k),
            move |x| gdn_ref(x, k as usize),
        ));
    }
}

/// The sequence-model cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    ssm_conv(&mut out);
    ssm_scan(&mut out);
    rwkv(&mut out);
    gated_delta_net(&mut out);
    out
}
