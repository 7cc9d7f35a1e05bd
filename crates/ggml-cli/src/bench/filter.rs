//! Which cases run. `-o`: as in `test-backend-ops`, a comma-separated list whose entries are op
//! names (`ADD`, `mul_mat`) or full case names (`ADD(type=f32,ne=[…],nr=[…])`, whose commas
//! inside the parentheses do not split the list). `-p`: a pattern searched for in a case's
//! parameters (`type_a=q4_K`; `*` matches any run of characters). Both ignore case.

/// The parsed `-o` list.
#[derive(Debug, PartialEq, Eq)]
pub struct OpFilter {
    entries: Vec<String>,
}

impl OpFilter {
    /// Splits `spec` into entries; `Err` for an empty entry or unbalanced parentheses.
    pub fn parse(spec: &str) -> Result<OpFilter, String> {
        let mut entries = Vec::new();
        let mut current = String::new();
        let mut depth = 0usize;
        for c in spec.chars() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth = depth
                        .checked_sub(1)
                        .ok_or_else(|| format!("-o {spec:?}: a ')' has no matching '('"))?
                }
                ',' if depth == 0 => {
                    entries.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(c);
        }
        if depth != 0 {
            return Err(format!("-o {spec:?}: a '(' is not closed"));
        }
        entries.push(current);
        if entries.iter().any(String::is_empty) {
            return Err(format!("-o {spec:?}: empty op name in the list"));
        }
        Ok(OpFilter { entries })
    }

    /// The op name of every entry (the part before any parenthesis), as given.
    pub fn op_names(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .map(|e| e.split_once('(').map_or(e.as_str(), |(op, _)| op))
    }

    /// Whether the case with op `op` and parameter string `vars` is selected.
    pub fn matches(&self, op: &str, vars: &str) -> bool {
        self.entries.iter().any(|e| match e.split_once('(') {
            None => e.eq_ignore_ascii_case(op),
            Some((name, rest)) => {
                name.eq_ignore_ascii_case(op)
                    && rest
                        .strip_suffix(')')
                        .is_some_and(|v| v.eq_ignore_ascii_case(vars))
            }
        })
    }
}

/// The parsed `-p` pattern: pieces that must appear in order, anywhere in the parameters.
#[derive(Debug, PartialEq, Eq)]
pub struct Pattern {
    pieces: Vec<String>,
}

impl Pattern {
    /// `Err` for an empty pattern.
    pub fn parse(spec: &str) -> Result<Pattern, String> {
        if spec.is_empty() {
            return Err("-p needs a non-empty pattern".into());
        }
        let pieces = spec
            .split('*')
            .filter(|p| !p.is_empty())
            .map(str::to_ascii_lowercase)
            .collect();
        Ok(Pattern { pieces })
    }

    /// Whether `vars` holds the pattern.
    pub fn matches(&self, vars: &str) -> bool {
        let vars = vars.to_ascii_lowercase();
        let mut rest = vars.as_str();
        self.pieces.iter().all(|p| match rest.find(p.as_str()) {
            Some(at) => {
                rest = &rest[at + p.len()..];
                true
            }
            None => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_commas_outside_parentheses_and_ignores_case() {
        let f = OpFilter::parse("add,MUL(type=f32,ne=[4,1,1,1],nr=[1,1,1,1]),SiLU").unwrap();
        assert_eq!(f.op_names().collect::<Vec<_>>(), ["add", "MUL", "SiLU"]);
        assert!(f.matches("ADD", "type=f32,ne=[8,1,1,1],nr=[1,1,1,1]"));
        assert!(f.matches("SILU", "type=f32"));
        assert!(f.matches("MUL", "type=f32,ne=[4,1,1,1],nr=[1,1,1,1]"));
        assert!(f.matches("MUL", "TYPE=F32,ne=[4,1,1,1],nr=[1,1,1,1]"));
        assert!(!f.matches("MUL", "type=f32,ne=[4,1,1,1],nr=[1,2,1,1]"));
        assert!(!f.matches("MUL_MAT", "type_a=f32"));
    }

    #[test]
    fn rejects_empty_entries_and_unbalanced_parentheses() {
        for bad in [
            "",
            "ADD,",
            ",ADD",
            "ADD,,MUL",
            "ADD(type=f32",
            "ADD)",
            "A(b))",
        ] {
            assert!(OpFilter::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn patterns_search_the_parameters() {
        let vars = "type_a=q4_K,type_b=f32,m=4096,n=1,k=4096";
        let p = |s: &str| Pattern::parse(s).unwrap();
        assert!(p("type_a=q4_K").matches(vars));
        assert!(p("TYPE_A=Q4_k").matches(vars), "case is ignored");
        assert!(p("q4_K*n=1").matches(vars));
        assert!(p("*").matches(vars));
        assert!(!p("n=1*q4_K").matches(vars), "pieces in order");
        assert!(!p("type_a=q8_0").matches(vars));
        assert!(Pattern::parse("").is_err());
    }
}
