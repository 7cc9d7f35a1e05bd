//! `-o`: which cases run. As in `test-backend-ops`, a comma-separated list whose entries are op
//! names (`ADD`, `MUL_MAT`, `SILU`) or full case names (`ADD(type=f32,ne=[…],nr=[…])`, whose
//! commas inside the parentheses do not split the list).

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

    /// The op name of every entry (the part before any parenthesis).
    pub fn op_names(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .map(|e| e.split_once('(').map_or(e.as_str(), |(op, _)| op))
    }

    /// Whether the case with op `op` and parameter string `vars` is selected.
    pub fn matches(&self, op: &str, vars: &str) -> bool {
        self.entries.iter().any(|e| match e.split_once('(') {
            None => e == op,
            Some((name, rest)) => name == op && rest.strip_suffix(')') == Some(vars),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_commas_outside_parentheses() {
        let f = OpFilter::parse("ADD,MUL(type=f32,ne=[4,1,1,1],nr=[1,1,1,1]),SILU").unwrap();
        assert_eq!(f.op_names().collect::<Vec<_>>(), ["ADD", "MUL", "SILU"]);
        assert!(f.matches("ADD", "type=f32,ne=[8,1,1,1],nr=[1,1,1,1]"));
        assert!(f.matches("MUL", "type=f32,ne=[4,1,1,1],nr=[1,1,1,1]"));
        assert!(!f.matches("MUL", "type=f32,ne=[4,1,1,1],nr=[1,2,1,1]"));
        assert!(!f.matches("MUL_MAT", "type_a=f32"));
        assert!(
            !f.matches("add", "type=f32"),
            "names are case-sensitive, as GGML's"
        );
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
}
