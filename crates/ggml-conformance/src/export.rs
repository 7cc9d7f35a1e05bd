//! The case export of the op-case exchange format (version 1): one JSON object per line with
//! the case's name, a fingerprint, every tensor of its graph (type, shape, strides, op, op
//! parameters, flags, operands, view source, and the bytes of the leaves) and its outputs.
//! The JSON and base64 are written here by hand: the format is small and fixed.

use std::collections::HashMap;
use std::fmt::Write as _;

use ggml::Tensor;

use crate::case::Case;
use crate::instance::instantiate;
use crate::rng::{fnv1a, FNV_OFFSET};

/// One exported case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exported {
    /// The case's fingerprint (what the export's `hash` field spells in hex).
    pub hash: u64,
    /// The JSON line, without its newline.
    pub line: String,
}

/// Exports `case` with base seed `seed`: `Ok(None)` when the format cannot carry it (a tensor
/// has a fifth dimension other than 1, the format carrying 4, or the graph has a custom op,
/// whose Rust closure GGML cannot run), `Err` when the case cannot be built.
pub fn export_case(case: &Case, seed: u64) -> Result<Option<Exported>, String> {
    let inst = instantiate(case, seed)?;
    let data: HashMap<u64, &Vec<u8>> = inst.bases.iter().map(|(t, b)| (t.id(), b)).collect();
    let order = topological(&inst.outputs);
    let custom = |t: &Tensor| {
        matches!(
            t.op(),
            ggml::Op::MapCustom1 | ggml::Op::MapCustom2 | ggml::Op::MapCustom3 | ggml::Op::Custom
        )
    };
    // GGML asserts (or crashes) on the out-of-range indices of a case that must fail.
    let must_fail = matches!(case.metric, crate::case::Metric::ComputeFails(_));
    if must_fail || order.iter().any(|t| t.ne()[4] != 1 || custom(t)) {
        return Ok(None);
    }
    let index: HashMap<u64, usize> = order.iter().enumerate().map(|(i, t)| (t.id(), i)).collect();
    let mut body = String::from("\"tensors\":[");
    for (i, t) in order.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        let ne = t.ne();
        let nb = t.nb();
        let _ = write!(
            body,
            "{{\"type\":{},\"ne\":[{},{},{},{}],\"nb\":[{},{},{},{}],\"op\":{},\"params\":[",
            t.ty() as u32,
            ne[0],
            ne[1],
            ne[2],
            ne[3],
            nb[0],
            nb[1],
            nb[2],
            nb[3],
            t.op() as u32
        );
        let params: Vec<String> = t.op_params().iter().map(i32::to_string).collect();
        body.push_str(&params.join(","));
        let _ = write!(body, "],\"flags\":{},\"src\":[", t.flags());
        let used = (0..ggml::tensor::MAX_SRC)
            .rev()
            .find(|&s| t.src(s).is_some());
        let srcs: Vec<String> = (0..used.map_or(0, |u| u + 1))
            .map(|s| {
                t.src(s)
                    .map_or("null".to_string(), |x| index[&x.id()].to_string())
            })
            .collect();
        body.push_str(&srcs.join(","));
        body.push_str("],\"view_src\":");
        match t.view_src() {
            Some(v) => {
                let _ = write!(body, "{},\"view_offs\":{}", index[&v.id()], t.view_offs());
            }
            None => body.push_str("null,\"view_offs\":0"),
        }
        body.push_str(",\"data\":");
        if t.op() == ggml::Op::None && t.view_src().is_none() {
            // Leaves that are not inputs (a copy's destination) start zero-filled.
            let zeros;
            let bytes = match data.get(&t.id()) {
                Some(b) => b.as_slice(),
                None => {
                    zeros = vec![0u8; t.nbytes()];
                    &zeros
                }
            };
            body.push('"');
            base64(&mut body, bytes);
            body.push('"');
        } else {
            body.push_str("null");
        }
        body.push('}');
    }
    body.push_str("],\"outputs\":[");
    let outs: Vec<String> = inst
        .outputs
        .iter()
        .map(|t| index[&t.id()].to_string())
        .collect();
    body.push_str(&outs.join(","));
    body.push(']');
    let mut name = String::new();
    json_string(&mut name, case.name());
    let hash = fnv1a(fnv1a(FNV_OFFSET, name.as_bytes()), body.as_bytes());
    let line = format!("{{\"name\":{name},\"hash\":\"{hash:016x}\",{body}}}");
    Ok(Some(Exported { hash, line }))
}

/// Every tensor the outputs depend on (operands and view sources), each after all of its own.
fn topological(outputs: &[Tensor]) -> Vec<Tensor> {
    let mut order: Vec<Tensor> = Vec::new();
    let mut done = std::collections::HashSet::new();
    // (tensor, whether its dependencies have been pushed)
    let mut stack: Vec<(Tensor, bool)> = outputs.iter().rev().map(|t| (t.clone(), false)).collect();
    while let Some((t, expanded)) = stack.pop() {
        if done.contains(&t.id()) {
            continue;
        }
        if expanded {
            done.insert(t.id());
            order.push(t);
            continue;
        }
        stack.push((t.clone(), true));
        let deps = (0..ggml::tensor::MAX_SRC)
            .rev()
            .filter_map(|s| t.src(s).cloned())
            .chain(t.view_src().cloned());
        for d in deps {
            if !done.contains(&d.id()) {
                stack.push((d, false));
            }
        }
    }
    order
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends `bytes` in standard base64 with padding.
fn base64(out: &mut String, bytes: &[u8]) {
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
}

/// Appends `s` as a JSON string.
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Input, Layout, Vars};
    use ggml::Type;

    #[test]
    fn base64_matches_rfc4648() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            let mut s = String::new();
            base64(&mut s, input.as_bytes());
            assert_eq!(s, want);
        }
        let mut s = String::new();
        json_string(&mut s, "a\"b\\\n");
        assert_eq!(s, "\"a\\\"b\\\\\\u000a\"");
    }

    #[test]
    fn export_lists_tensors_sources_first() {
        let case = Case::new(
            "ADD",
            Vars::new().ty("type", Type::F32),
            vec![
                Input::new(Type::F32, &[3, 2]).layout(Layout::Transposed),
                Input::new(Type::F32, &[3, 1]),
            ],
            |ctx, x| ctx.add(&x[0], &x[1]),
            |x| x[0].clone(),
        );
        let e = export_case(&case, 1).unwrap().unwrap();
        let again = export_case(&case, 1).unwrap().unwrap();
        assert_eq!(e, again);
        assert_ne!(export_case(&case, 2).unwrap().unwrap().hash, e.hash);
        let l = &e.line;
        assert!(
            l.starts_with("{\"name\":\"ADD(type=f32)\",\"hash\":\""),
            "{l}"
        );
        // The transposed input's base (a leaf with data), its view, b, then the sum.
        let tensors: Vec<&str> = l.split("{\"type\":").skip(1).collect();
        assert_eq!(tensors.len(), 4, "{l}");
        assert!(tensors[0].contains("\"ne\":[2,3,1,1],\"nb\":[4,8,24,24],\"op\":0"));
        assert!(tensors[0].contains("\"data\":\""));
        assert!(tensors[1].contains("\"op\":39")); // TRANSPOSE
        assert!(tensors[1].contains("\"src\":[0],\"view_src\":0,\"view_offs\":0,\"data\":null"));
        assert!(tensors[3].contains("\"op\":2")); // ADD
        assert!(tensors[3].contains("\"src\":[1,2]"));
        assert!(l.ends_with("\"outputs\":[3]}"));
        let five_d = Case::new(
            "NEG",
            Vars::new(),
            vec![Input::new(Type::F32, &[1, 1, 1, 1, 2])],
            |ctx, x| ctx.neg(&x[0]),
            |x| x[0].clone(),
        );
        assert_eq!(export_case(&five_d, 1).unwrap(), None);
        // A closure cannot travel to GGML.
        let custom = Case::new(
            "MAP_CUSTOM1",
            Vars::new(),
            vec![Input::new(Type::F32, &[4])],
            |ctx, x| ctx.map_custom1(&x[0], |_, _, _, _| {}, 1),
            |x| x[0].clone(),
        );
        assert_eq!(export_case(&custom, 1).unwrap(), None);
    }
}
