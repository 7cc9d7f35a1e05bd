//! Which cases run: `-o` op names (comma-separated, case-insensitive) and `-p` a pattern over
//! the case names in a small regular-expression subset.
//!
//! The pattern language: literal characters; `.` any character; `[abc]`, `[a-z0-9]`, `[^…]`
//! classes; `\d` a digit, `\w` a word character, `\` before any other character makes it
//! literal (write `\[`, `\(`, `\.` for those characters); `*`, `+`, `?` after an item; `^` and
//! `$` anchors; `|` between alternatives. Groups are not supported (an unescaped parenthesis
//! is an error). A pattern matches a name when it matches anywhere in it, as a regex search.

use crate::case::Case;

/// One pattern item.
#[derive(Clone, Debug, PartialEq)]
enum Atom {
    Char(char),
    Any,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Atom {
    fn matches(&self, c: char) -> bool {
        match self {
            Atom::Char(x) => *x == c,
            Atom::Any => true,
            Atom::Class { negated, ranges } => {
                ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&c)) != *negated
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Repeat {
    One,
    Optional,
    Star,
    Plus,
}

#[derive(Clone, Debug, PartialEq)]
struct Alternative {
    start: bool,
    end: bool,
    items: Vec<(Atom, Repeat)>,
}

/// A compiled `-p` pattern.
#[derive(Clone, Debug, PartialEq)]
pub struct Pattern {
    source: String,
    alternatives: Vec<Alternative>,
}

fn escape_class(c: char) -> Option<Vec<(char, char)>> {
    match c {
        'd' => Some(vec![('0', '9')]),
        'w' => Some(vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')]),
        's' => Some(vec![(' ', ' '), ('\t', '\r')]),
        _ => None,
    }
}

impl Pattern {
    /// Compiles `source`; `Err` naming the pattern and the problem.
    pub fn parse(source: &str) -> Result<Pattern, String> {
        let err = |what: &str| Err(format!("-p {source:?}: {what}"));
        let mut alternatives = Vec::new();
        for part in split_alternatives(source) {
            let chars: Vec<char> = part.chars().collect();
            let mut alt = Alternative {
                start: false,
                end: false,
                items: Vec::new(),
            };
            let mut i = 0;
            while i < chars.len() {
                let c = chars[i];
                i += 1;
                let atom = match c {
                    '^' if alt.items.is_empty() && i == 1 => {
                        alt.start = true;
                        continue;
                    }
                    '$' if i == chars.len() => {
                        alt.end = true;
                        continue;
                    }
                    '.' => Atom::Any,
                    '(' | ')' => {
                        return err("groups are not supported; write \\( or \\) for a parenthesis")
                    }
                    '*' | '+' | '?' => {
                        return err(&format!("'{c}' follows nothing it could repeat"))
                    }
                    '\\' => {
                        let Some(&e) = chars.get(i) else {
                            return err("a trailing '\\' escapes nothing");
                        };
                        i += 1;
                        match escape_class(e) {
                            Some(ranges) => Atom::Class {
                                negated: false,
                                ranges,
                            },
                            None => Atom::Char(e),
                        }
                    }
                    '[' => {
                        let negated = chars.get(i) == Some(&'^');
                        if negated {
                            i += 1;
                        }
                        let mut ranges = Vec::new();
                        let mut closed = false;
                        while i < chars.len() {
                            let mut lo = chars[i];
                            i += 1;
                            if lo == ']' && !ranges.is_empty() {
                                closed = true;
                                break;
                            }
                            if lo == '\\' {
                                let Some(&e) = chars.get(i) else { break };
                                i += 1;
                                if let Some(r) = escape_class(e) {
                                    ranges.extend(r);
                                    continue;
                                }
                                lo = e;
                            }
                            if chars.get(i) == Some(&'-')
                                && chars.get(i + 1).is_some_and(|&c| c != ']')
                            {
                                let hi = chars[i + 1];
                                i += 2;
                                if hi < lo {
                                    return err(&format!("range {lo}-{hi} is backwards"));
                                }
                                ranges.push((lo, hi));
                            } else {
                                ranges.push((lo, lo));
                            }
                        }
                        if !closed {
                            return err("a '[' is not closed (write \\[ for the character)");
                        }
                        Atom::Class { negated, ranges }
                    }
                    c => Atom::Char(c),
                };
                let repeat = match chars.get(i) {
                    Some('*') => Repeat::Star,
                    Some('+') => Repeat::Plus,
                    Some('?') => Repeat::Optional,
                    _ => Repeat::One,
                };
                if repeat != Repeat::One {
                    i += 1;
                }
                alt.items.push((atom, repeat));
            }
            alternatives.push(alt);
        }
        Ok(Pattern {
            source: source.to_string(),
            alternatives,
        })
    }

    /// Whether the pattern matches anywhere in `text`.
    pub fn is_match(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        self.alternatives.iter().any(|alt| {
            let last_start = if alt.start { 0 } else { chars.len() };
            (0..=last_start).any(|s| match_here(&alt.items, &chars[s..], alt.end))
        })
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

/// Splits at `|` outside classes and escapes.
fn split_alternatives(s: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let (mut in_class, mut escaped) = (false, false);
    for c in s.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' => in_class = true,
            ']' => in_class = false,
            '|' if !in_class => {
                parts.push(String::new());
                continue;
            }
            _ => {}
        }
        parts.last_mut().expect("never empty").push(c);
    }
    parts
}

fn match_here(items: &[(Atom, Repeat)], text: &[char], end: bool) -> bool {
    let Some(((atom, repeat), rest)) = items.split_first() else {
        return !end || text.is_empty();
    };
    let (min, max) = match repeat {
        Repeat::One => (1, 1),
        Repeat::Optional => (0, 1),
        Repeat::Star => (0, usize::MAX),
        Repeat::Plus => (1, usize::MAX),
    };
    let run = text
        .iter()
        .take_while(|&&c| atom.matches(c))
        .count()
        .min(max);
    // Greedy, backing off one character at a time.
    (min..=run)
        .rev()
        .any(|n| n <= text.len() && match_here(rest, &text[n..], end))
}

/// The case selection of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    ops: Vec<String>,
    pattern: Option<Pattern>,
}

impl Filter {
    /// A filter from `-o` (comma-separated op names, case-insensitive) and `-p` (a pattern over
    /// case names); `None` selects everything. `Err` for an empty op name or a bad pattern.
    pub fn new(ops: Option<&str>, pattern: Option<&str>) -> Result<Filter, String> {
        let ops = match ops {
            None => Vec::new(),
            Some(list) => {
                let names: Vec<String> = list
                    .split(',')
                    .map(|s| s.trim().to_ascii_uppercase())
                    .collect();
                if names.iter().any(String::is_empty) {
                    return Err(format!("-o {list:?}: an op name in the list is empty"));
                }
                names
            }
        };
        let pattern = pattern.map(Pattern::parse).transpose()?;
        Ok(Filter { ops, pattern })
    }

    /// Whether `case` is selected.
    pub fn selects(&self, case: &Case) -> bool {
        self.selects_name(case.op(), case.name())
    }

    /// Whether a case of op `op` named `name` (`OP(var=value,…)`) is selected: what
    /// [`Filter::selects`] decides for a suite case, for other case lists (the benchmark's).
    pub fn selects_name(&self, op: &str, name: &str) -> bool {
        (self.ops.is_empty() || self.ops.iter().any(|o| o.eq_ignore_ascii_case(op)))
            && self.pattern.as_ref().is_none_or(|p| p.is_match(name))
    }

    /// The selected cases of `cases`; `Err` when the filter selects none of them, naming it.
    pub fn apply(&self, cases: Vec<Case>) -> Result<Vec<Case>, String> {
        let picked: Vec<Case> = cases.into_iter().filter(|c| self.selects(c)).collect();
        if picked.is_empty() {
            let mut what = Vec::new();
            if !self.ops.is_empty() {
                what.push(format!("-o {}", self.ops.join(",")));
            }
            if let Some(p) = &self.pattern {
                what.push(format!("-p {:?}", p.as_str()));
            }
            return Err(format!("no case matches {}", what.join(" and ")));
        }
        Ok(picked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        Pattern::parse(p).unwrap().is_match(t)
    }

    #[test]
    fn pattern_subset() {
        assert!(m("type=f16", "ADD(type=f16,ne=[10,5,4,3])"));
        assert!(!m("type=f16", "ADD(type=f32,ne=[10,5,4,3])"));
        assert!(m("^ADD\\(", "ADD(type=f16)"));
        assert!(!m("^DD", "ADD(type=f16)"));
        assert!(m("ne=\\[10,", "ADD(type=f16,ne=[10,5])"));
        assert!(m("v=1\\)$", "SILU(type=f32,v=1)"));
        assert!(!m("v=1$", "SILU(type=f32,v=1)"));
        assert!(m("type_a=q[0-9]_[0K]", "MUL_MAT(type_a=q4_K)"));
        assert!(m("type_a=[^f]", "MUL_MAT(type_a=q4_K)"));
        assert!(!m("type_a=[^q]", "MUL_MAT(type_a=q4_K)"));
        assert!(m("m=\\d+,n=9", "MUL_MAT(m=16,n=9,k=256)"));
        assert!(m("a.*b", "xaZZZbx") && m("ab*c", "ac") && m("ab+c", "abbc") && !m("ab+c", "ac"));
        assert!(m("colou?r", "color") && m("colou?r", "colour"));
        assert!(m("f16|bf16", "x=bf16") && m("SUM|MEAN", "MEAN(x)") && !m("SUM|MEAN", "ADD"));
        assert!(m("a[|]b", "a|b"));
        for bad in ["(x)", "a[b", "*a", "a\\", "[z-a]"] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
    }
}
