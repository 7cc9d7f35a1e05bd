//! `ggml gguf …`: GGUF file commands. `inspect FILE [--json]` prints the header, all metadata
//! (long arrays and strings abbreviated in text, complete in JSON) and the tensors.

use crate::rope_types::ROPE_TYPES;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ggml::gguf::{Array, GgufFile, GgufString, Value};

use crate::json;
use crate::CliError;

const USAGE: &str = "usage: ggml gguf inspect FILE [--json]
       ggml gguf quantize [OPTIONS] IN OUT TYPE

  inspect FILE     print the header, metadata (llama.cpp's enums decoded) and tensors
    --json         print everything as one JSON object, arrays complete
  quantize         write OUT, IN quantized as llama-quantize does (ggml gguf quantize --help)";

/// Array elements shown in text output before eliding the rest.
const TEXT_ARRAY_ITEMS: usize = 8;
/// Characters of a string shown in text output before eliding the rest.
const TEXT_STRING_CHARS: usize = 120;

/// Runs `ggml gguf ARGS…`.
pub fn run(args: &[OsString]) -> Result<(), CliError> {
    let sub = args.first().map(|a| a.to_string_lossy().into_owned());
    match sub.as_deref() {
        Some("inspect") => inspect(&args[1..]),
        Some("quantize") => crate::quantize::run(&args[1..]),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(CliError::Usage(format!(
            "unknown gguf command {other:?}\n\n{USAGE}"
        ))),
        None => Err(CliError::Usage(USAGE.to_string())),
    }
}

fn inspect(args: &[OsString]) -> Result<(), CliError> {
    let mut json = false;
    let mut file: Option<PathBuf> = None;
    for a in args {
        match a.to_str() {
            Some("--json") => json = true,
            Some("-h" | "--help") => {
                println!("{USAGE}");
                return Ok(());
            }
            Some(flag) if flag.starts_with("--") => {
                return Err(CliError::Usage(format!("unknown option {flag}\n\n{USAGE}")))
            }
            _ if file.is_some() => {
                return Err(CliError::Usage(format!(
                    "more than one FILE given ({})\n\n{USAGE}",
                    a.to_string_lossy()
                )))
            }
            _ => file = Some(PathBuf::from(a)),
        }
    }
    let file = file.ok_or_else(|| CliError::Usage(format!("inspect needs a FILE\n\n{USAGE}")))?;
    let f = open(&file)?;
    let name = file.to_string_lossy();
    let out = if json {
        render_json(&f, &name)
    } else {
        render_text(&f, &name)
    };
    crate::write_stdout(&out)
}

/// Opens a GGUF file; a path that is a directory, missing or unreadable gets an error that
/// says which, rather than the system's bare message.
pub fn open(path: &Path) -> Result<GgufFile, CliError> {
    let failed = |m: String| Err(CliError::Failed(m));
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return failed(format!(
                "{} is a directory; give the path of a .gguf file in it",
                path.display()
            ))
        }
        Ok(m) if !m.is_file() => {
            return failed(format!(
                "{} is not a regular file (a device, socket or pipe)",
                path.display()
            ))
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return failed(format!("{}: no such file", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return failed(format!("{}: permission denied", path.display()))
        }
        Err(e) => return failed(format!("{}: {e}", path.display())),
    }
    // The library's errors name the path.
    GgufFile::open(path).map_err(|e| CliError::Failed(e.to_string()))
}

// ---- enums ----

/// llama.cpp's names for the values of `{arch}.pooling_type` (from -1).
const POOLING: [&str; 6] = ["unspecified", "none", "mean", "cls", "last", "rank"];
/// llama.cpp's names for the values of `{arch}.expert_gating_func`.
const GATING: [&str; 5] = [
    "none",
    "softmax",
    "sigmoid",
    "softmax_weight",
    "sqrt_softplus",
];
/// llama.cpp's names for the values of `tokenizer.ggml.token_type`.
const TOKEN_TYPES: [&str; 7] = [
    "undefined",
    "normal",
    "unknown",
    "control",
    "user_defined",
    "unused",
    "byte",
];

/// What a metadata value means, for the keys whose values are llama.cpp enums: the file type,
/// the pooling and expert gating kinds, the token types (counted by kind), and for the
/// architecture the rope type llama.cpp gives it.
fn decode(key: &str, v: &Value) -> Option<String> {
    if key == "general.architecture" {
        let arch = v.as_string()?.as_str().ok()?;
        let i = ROPE_TYPES.binary_search_by(|(a, _)| a.cmp(&arch)).ok()?;
        return Some(format!("rope type {}", ROPE_TYPES[i].1));
    }
    let name = |names: &[&str], offset: i128| {
        let i = v.as_integer()?;
        let n = usize::try_from(i + offset).ok().and_then(|i| names.get(i));
        Some(n.map_or_else(|| "unknown".to_string(), |n| n.to_string()))
    };
    if key == "general.file_type" {
        return v.as_integer().map(crate::quantize::describe_file_type);
    }
    if key.ends_with(".pooling_type") {
        return name(&POOLING, 1);
    }
    if key.ends_with(".expert_gating_func") {
        return name(&GATING, 0);
    }
    if key == "tokenizer.ggml.token_type" {
        let Value::Array(a) = v else { return None };
        let mut counts = [0usize; TOKEN_TYPES.len() + 1];
        for i in 0..a.len() {
            let t = a.get(i).and_then(|t| t.as_integer());
            let slot = t
                .and_then(|t| usize::try_from(t).ok())
                .filter(|&t| t < TOKEN_TYPES.len())
                .unwrap_or(TOKEN_TYPES.len());
            counts[slot] += 1;
        }
        let parts: Vec<String> = counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, c)| format!("{c} {}", TOKEN_TYPES.get(i).unwrap_or(&"unknown type")))
            .collect();
        return Some(parts.join(", "));
    }
    None
}

// ---- text ----

fn render_text(f: &GgufFile, name: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "file:        {name}");
    let _ = writeln!(s, "version:     {}", f.version());
    let _ = writeln!(s, "size:        {} bytes", f.as_bytes().len());
    let _ = writeln!(s, "tensors:     {}", f.n_tensors());
    let _ = writeln!(s, "kv pairs:    {}", f.n_kv());
    let _ = writeln!(s, "alignment:   {}", f.alignment());
    let _ = writeln!(s, "data offset: {}", f.data_offset());

    let _ = writeln!(s, "\nmetadata:");
    let width = f
        .metadata()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    for (k, v) in f.metadata() {
        let ty = match v {
            Value::Array(a) => format!("arr[{}; {}]", a.elem_type(), a.len()),
            v => v.value_type().name().to_string(),
        };
        let decoded = decode(k, v).map_or(String::new(), |d| format!("  ({d})"));
        let _ = writeln!(s, "  {k:<width$}  {ty:<14} = {}{decoded}", text_value(v));
    }

    let _ = writeln!(s, "\ntensors:");
    let rows: Vec<[String; 6]> = f
        .tensors()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let shape: Vec<String> = t.shape().iter().map(i64::to_string).collect();
            [
                i.to_string(),
                t.name().to_string(),
                t.ty().name().to_string(),
                format!("[{}]", shape.join(", ")),
                t.offset().to_string(),
                t.size().to_string(),
            ]
        })
        .collect();
    let header = ["#", "name", "type", "shape", "offset", "size"].map(String::from);
    let mut widths = [0usize; 6];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                // Numbers right-aligned, text left-aligned.
                if matches!(c, 0 | 4 | 5) {
                    format!("{cell:>w$}")
                } else {
                    format!("{cell:<w$}")
                }
            })
            .collect();
        let _ = writeln!(s, "  {}", cells.join("  ").trim_end());
    }
    s
}

fn text_string(g: &GgufString) -> String {
    let text = g.to_string_lossy();
    let n = text.chars().count();
    let mut shown: String = text.chars().take(TEXT_STRING_CHARS).collect();
    let note = if g.as_str().is_err() {
        " (not UTF-8)"
    } else {
        ""
    };
    if n > TEXT_STRING_CHARS {
        shown = format!("{shown:?}… ({} bytes){note}", g.len());
    } else {
        shown = format!("{shown:?}{note}");
    }
    shown
}

fn text_value(v: &Value) -> String {
    match v {
        Value::String(g) => text_string(g),
        Value::Array(a) => text_array(a),
        Value::F32(x) => format!("{x:?}"),
        Value::F64(x) => format!("{x:?}"),
        Value::Bool(b) => b.to_string(),
        other => other
            .as_integer()
            .map(|i| i.to_string())
            .unwrap_or_default(),
    }
}

fn text_array(a: &Array) -> String {
    let shown: Vec<String> = (0..a.len().min(TEXT_ARRAY_ITEMS))
        .filter_map(|i| a.get(i))
        .map(|v| text_value(&v))
        .collect();
    let more = a.len().saturating_sub(TEXT_ARRAY_ITEMS);
    if more > 0 {
        format!("[{}, … {more} more]", shown.join(", "))
    } else {
        format!("[{}]", shown.join(", "))
    }
}

// ---- JSON ----

fn render_json(f: &GgufFile, name: &str) -> String {
    let mut s = String::new();
    s.push('{');
    json::key(&mut s, "file", true);
    json::string(&mut s, name);
    for (k, v) in [
        ("version", f.version() as u64),
        ("size", f.as_bytes().len() as u64),
        ("n_tensors", f.n_tensors() as u64),
        ("n_kv", f.n_kv() as u64),
        ("alignment", f.alignment() as u64),
        ("data_offset", f.data_offset() as u64),
    ] {
        json::key(&mut s, k, false);
        let _ = write!(s, "{v}");
    }
    json::key(&mut s, "metadata", false);
    s.push('\n');
    json::list(&mut s, f.metadata(), |s, (k, v)| {
        s.push_str("\n {");
        json::key(s, "key", true);
        json::string(s, k);
        json::key(s, "type", false);
        json::string(s, v.value_type().name());
        json::key(s, "value", false);
        json_value(s, v);
        if let Some(d) = decode(k, v) {
            json::key(s, "decoded", false);
            json::string(s, &d);
        }
        s.push('}');
    });
    json::key(&mut s, "tensors", false);
    json::list(&mut s, f.tensors(), |s, t| {
        s.push_str("\n {");
        json::key(s, "name", true);
        json::string(s, t.name());
        json::key(s, "type", false);
        json::string(s, t.ty().name());
        let range = t.file_range();
        for (k, v) in [
            ("type_id", t.ty() as u64),
            ("offset", t.offset()),
            ("size", t.size() as u64),
            ("file_offset", range.start as u64),
        ] {
            json::key(s, k, false);
            let _ = write!(s, "{v}");
        }
        json::key(s, "ne", false);
        json::list(s, t.shape(), |s, d| {
            let _ = write!(s, "{d}");
        });
        s.push('}');
    });
    s.push_str("}\n");
    s
}

/// A value as JSON: numbers, booleans, strings (`{"hex": …}` for bytes that are not UTF-8),
/// arrays as `{"elem": type, "items": […]}`; floats that JSON cannot hold as strings.
fn json_value(s: &mut String, v: &Value) {
    match v {
        Value::String(g) => match g.as_str() {
            Ok(t) => json::string(s, t),
            Err(_) => {
                s.push('{');
                json::key(s, "hex", true);
                let hex: String = g.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
                json::string(s, &hex);
                s.push('}');
            }
        },
        Value::Array(a) => {
            s.push('{');
            json::key(s, "elem", true);
            json::string(s, a.elem_type().name());
            json::key(s, "items", false);
            json::list(s, 0..a.len(), |s, i| {
                if let Some(item) = a.get(i) {
                    json_value(s, &item);
                }
            });
            s.push('}');
        }
        Value::F32(x) => json::float(s, *x as f64),
        Value::F64(x) => json::float(s, *x),
        Value::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
        other => {
            let _ = write!(s, "{}", other.as_integer().unwrap_or_default());
        }
    }
}
