//! A minimal JSON writer: enough to emit objects, arrays, numbers and escaped strings without a
//! serialization framework.

use std::fmt::Write;

/// Appends `s` as a JSON string literal (quotes, backslashes and control characters escaped).
pub fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends a float: the shortest decimal that reads back as `x`, or `"nan"`, `"inf"`, `"-inf"`
/// (JSON has no literal for those).
pub fn float(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("\"nan\"");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "\"inf\"" } else { "\"-inf\"" });
    } else {
        let _ = write!(out, "{x:?}");
    }
}

/// Appends `"key":` (with a leading comma unless `first`).
pub fn key(out: &mut String, k: &str, first: bool) {
    if !first {
        out.push(',');
    }
    string(out, k);
    out.push(':');
}

/// Appends `[item, item, …]`, writing each item with `f`.
pub fn list<T>(
    out: &mut String,
    items: impl IntoIterator<Item = T>,
    mut f: impl FnMut(&mut String, T),
) {
    out.push('[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        f(out, item);
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        let mut s = String::new();
        string(&mut s, "a\"b\\c\nd\u{1}é");
        assert_eq!(s, r#""a\"b\\c\nd\u0001é""#);
        let mut f = String::new();
        float(&mut f, 0.1f32 as f64);
        f.push(' ');
        float(&mut f, f64::NEG_INFINITY);
        f.push(' ');
        float(&mut f, 1e300);
        assert_eq!(f, "0.10000000149011612 \"-inf\" 1e300");
    }
}
