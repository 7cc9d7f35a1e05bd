//! Pre-tokenizers of byte-level BPE: the regexes a vocabulary names, done as llama.cpp's
//! hand-written splitters (`unicode_regex_split_custom_*` in `src/unicode.cpp`) rather than by a
//! regex engine, so that each split point is the one llama.cpp makes.
//!
//! Each pass takes the text's code points and the current pieces (as lengths in code points)
//! and splits every piece further; a pipeline of passes is one [`PreTokenizer`].

use crate::unicode::Flags;

/// One splitting pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    /// GPT-2: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
    Gpt2,
    /// Llama 3 and Qwen 2 family: `(?i:'s|…)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}|
    /// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, with `D` digits per number piece and,
    /// when `marks`, combining marks counted with letters (Qwen 3.5).
    Llama3 { digits: usize, marks: bool },
    /// Each `\p{N}` code point alone (`\p{N}`).
    EachNumber,
    /// Runs of numbers (`\p{N}+`).
    NumberRuns,
    /// Runs of punctuation and the ASCII symbols `$+<=>^~|` (and `` ` `` when `backtick`):
    /// `[\p{P}\$\+<=>\^~\|]+`.
    PunctRuns { backtick: bool },
    /// Three ASCII digits (`[0-9][0-9][0-9]`).
    ThreeDigits,
    /// Runs of newlines and runs of everything else (`[^\n]+|[\n]+`).
    Newlines,
    /// Each `\r` or `\n` alone (`[\r\n]`).
    EachNewline,
    /// An optional whitespace then a run of letters (`\s?\p{L}+`), or of punctuation
    /// (`\s?\p{P}+`) when `punct`.
    SpaceThenRun { punct: bool },
    /// Runs of CJK ideographs, the ranges U+0800–U+9FA5 and Hangul (`[一-龥ࠀ-一가-퟿]+`).
    CjkRuns,
}

/// A vocabulary's pre-tokenizer: the passes llama.cpp runs for its `tokenizer.ggml.pre`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PreTokenizer {
    passes: Vec<Pass>,
}

impl PreTokenizer {
    /// The passes llama.cpp runs for a BPE vocabulary of pre-tokenizer type `pre`.
    pub(crate) fn for_type(pre: crate::vocab::PreType) -> PreTokenizer {
        use crate::vocab::PreType as P;
        let passes = match pre {
            P::Default => vec![
                Pass::PunctRuns { backtick: false },
                Pass::Gpt2,
                Pass::NumberRuns,
                Pass::ThreeDigits,
            ],
            P::Gpt2 => vec![Pass::Gpt2],
            P::Llama3 => vec![Pass::Llama3 {
                digits: 3,
                marks: false,
            }],
            P::Qwen2 => vec![Pass::Llama3 {
                digits: 1,
                marks: false,
            }],
            P::Qwen35 => vec![Pass::Llama3 {
                digits: 1,
                marks: true,
            }],
            P::Starcoder => vec![Pass::EachNumber, Pass::Gpt2],
            P::Falcon => vec![
                Pass::PunctRuns { backtick: true },
                Pass::Gpt2,
                Pass::ThreeDigits,
            ],
            P::Gemma4 => vec![Pass::Newlines],
            P::DeepseekCoder => vec![
                Pass::EachNewline,
                Pass::SpaceThenRun { punct: false },
                Pass::SpaceThenRun { punct: true },
                Pass::CjkRuns,
                Pass::EachNumber,
            ],
        };
        PreTokenizer { passes }
    }

    /// Splits `cpts` into pieces, returned as lengths in code points that sum to `cpts.len()`.
    pub(crate) fn split(&self, cpts: &[u32]) -> Vec<usize> {
        let mut pieces = vec![cpts.len()];
        for &pass in &self.passes {
            let mut next = Vec::with_capacity(pieces.len());
            let mut start = 0;
            for &len in &pieces {
                let piece = &cpts[start..start + len];
                match pass {
                    Pass::Gpt2 => split_gpt2(piece, &mut next),
                    Pass::Llama3 { digits, marks } => split_llama3(piece, digits, marks, &mut next),
                    Pass::EachNumber => split_matches(piece, &mut next, |t, i| {
                        usize::from(Flags::of(t[i]).is_number())
                    }),
                    Pass::NumberRuns => split_matches(piece, &mut next, |t, i| {
                        t[i..]
                            .iter()
                            .take_while(|&&c| Flags::of(c).is_number())
                            .count()
                    }),
                    Pass::PunctRuns { backtick } => split_matches(piece, &mut next, |t, i| {
                        t[i..]
                            .iter()
                            .take_while(|&&c| is_punct_run(c, backtick))
                            .count()
                    }),
                    Pass::ThreeDigits => split_matches(piece, &mut next, |t, i| {
                        let three = t.get(i..i + 3).is_some_and(|d| {
                            d.iter()
                                .all(|&c| (u32::from(b'0')..=u32::from(b'9')).contains(&c))
                        });
                        if three {
                            3
                        } else {
                            0
                        }
                    }),
                    Pass::EachNewline => split_matches(piece, &mut next, |t, i| {
                        usize::from(t[i] == u32::from(b'\r') || t[i] == u32::from(b'\n'))
                    }),
                    Pass::SpaceThenRun { punct } => split_matches(piece, &mut next, |t, i| {
                        let class = |c: u32| {
                            let f = Flags::of(c);
                            if punct {
                                f.is_punctuation()
                            } else {
                                f.is_letter()
                            }
                        };
                        let space = usize::from(Flags::of(t[i]).is_whitespace());
                        let run = t[i + space..].iter().take_while(|&&c| class(c)).count();
                        if run > 0 {
                            space + run
                        } else {
                            0
                        }
                    }),
                    Pass::CjkRuns => split_matches(piece, &mut next, |t, i| {
                        t[i..]
                            .iter()
                            .take_while(|&&c| matches!(c, 0x0800..=0x9FA5 | 0xAC00..=0xD7FF))
                            .count()
                    }),
                    Pass::Newlines => split_matches(piece, &mut next, |t, i| {
                        let nl = t[i] == u32::from(b'\n');
                        t[i..]
                            .iter()
                            .take_while(|&&c| (c == u32::from(b'\n')) == nl)
                            .count()
                    }),
                }
                start += len;
            }
            pieces = next;
        }
        pieces
    }
}

fn is_punct_run(c: u32, backtick: bool) -> bool {
    Flags::of(c).is_punctuation()
        || matches!(
            char::from_u32(c),
            Some('$' | '+' | '<' | '=' | '>' | '^' | '~' | '|')
        )
        || (backtick && c == u32::from(b'`'))
}

/// A regex iterator's split of `text`: wherever `matcher(text, i)` reports a match of that many
/// code points (0 = none) it becomes a piece, and the text between matches becomes pieces too.
fn split_matches(text: &[u32], out: &mut Vec<usize>, matcher: impl Fn(&[u32], usize) -> usize) {
    let (mut i, mut gap) = (0, 0);
    while i < text.len() {
        let n = matcher(text, i);
        if n == 0 {
            i += 1;
            continue;
        }
        if i > gap {
            out.push(i - gap);
        }
        out.push(n);
        i += n;
        gap = i;
    }
    if text.len() > gap {
        out.push(text.len() - gap);
    }
}

/// A cursor over one piece: code points and flags read as "absent" outside it, and the pieces
/// found so far.
struct Cursor<'a> {
    text: &'a [u32],
    prev_end: usize,
    out: &'a mut Vec<usize>,
}

/// The code point llama.cpp's splitters see past the end of the piece.
const OUT_OF_RANGE: u32 = u32::MAX;

impl<'a> Cursor<'a> {
    fn new(text: &'a [u32], out: &'a mut Vec<usize>) -> Self {
        Cursor {
            text,
            prev_end: 0,
            out,
        }
    }
    fn cpt(&self, i: usize) -> u32 {
        self.text.get(i).copied().unwrap_or(OUT_OF_RANGE)
    }
    fn flags(&self, i: usize) -> Flags {
        self.text.get(i).map_or(Flags::default(), |&c| Flags::of(c))
    }
    /// Ends a piece at `end`; returns its length.
    fn add(&mut self, end: usize) -> usize {
        let len = end - self.prev_end;
        if len > 0 {
            self.out.push(len);
        }
        self.prev_end = end;
        len
    }
    /// Ends a piece after the contraction at `pos`, if there is one; returns the new position.
    fn take_contraction(&mut self, pos: usize, lower: fn(u32) -> u32) -> Option<usize> {
        let n = self.contraction(pos, lower);
        (n > 0).then(|| pos + self.add(pos + n))
    }
    /// The length of the contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`) at `pos`,
    /// comparing letters after `lower` (identity for GPT-2, lowercase for Llama 3).
    fn contraction(&self, pos: usize, lower: fn(u32) -> u32) -> usize {
        let is = |i: usize, c: u8| lower(self.cpt(i)) == u32::from(c);
        if self.cpt(pos) != u32::from(b'\'') || pos + 1 >= self.text.len() {
            return 0;
        }
        if is(pos + 1, b's') || is(pos + 1, b't') || is(pos + 1, b'm') || is(pos + 1, b'd') {
            return 2;
        }
        if pos + 2 < self.text.len()
            && ((is(pos + 1, b'r') && is(pos + 2, b'e'))
                || (is(pos + 1, b'v') && is(pos + 2, b'e'))
                || (is(pos + 1, b'l') && is(pos + 2, b'l')))
        {
            return 3;
        }
        0
    }
    /// The whitespace tail shared by both splitters: `\s+(?!\S)` then `\s+`, else one code
    /// point on its own. Returns the new position.
    fn whitespace(&mut self, pos: usize, n_ws: usize) -> usize {
        let end = if n_ws > 1 && self.cpt(pos + n_ws) != OUT_OF_RANGE {
            pos + n_ws - 1
        } else if n_ws > 0 {
            pos + n_ws
        } else {
            pos + 1
        };
        self.add(end);
        end
    }
}

fn split_gpt2(text: &[u32], out: &mut Vec<usize>) {
    let mut c = Cursor::new(text, out);
    let mut pos = 0;
    while pos < text.len() {
        if let Some(next) = c.take_contraction(pos, |x| x) {
            pos = next;
            continue;
        }
        let cpt = c.cpt(pos);
        let space = cpt == u32::from(b' ');
        let mut f = if space {
            c.flags(pos + 1)
        } else {
            c.flags(pos)
        };
        let class: Option<fn(Flags) -> bool> = if f.is_letter() {
            Some(Flags::is_letter)
        } else if f.is_number() {
            Some(Flags::is_number)
        } else if !(f.is_whitespace() || f.is_letter() || f.is_number()) && f.is_some() {
            Some(|f| !(f.is_whitespace() || f.is_letter() || f.is_number()) && f.is_some())
        } else {
            None
        };
        if let Some(class) = class {
            pos += usize::from(space);
            while class(f) {
                pos += 1;
                f = c.flags(pos);
            }
            c.add(pos);
            continue;
        }
        let n_ws = (pos..).take_while(|&i| c.flags(i).is_whitespace()).count();
        pos = c.whitespace(pos, n_ws);
    }
}

fn split_llama3(text: &[u32], digits: usize, marks: bool, out: &mut Vec<usize>) {
    let word = |f: Flags| f.is_letter() || (marks && f.is_mark());
    let is_nl = |c: u32| c == u32::from(b'\r') || c == u32::from(b'\n');
    let mut c = Cursor::new(text, out);
    let mut pos = 0;
    while pos < text.len() {
        if let Some(next) = c.take_contraction(pos, crate::unicode::to_lower) {
            pos = next;
            continue;
        }
        let cpt = c.cpt(pos);
        let flags = c.flags(pos);
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if !(is_nl(cpt) || flags.is_number()) && (word(flags) || word(c.flags(pos + 1))) {
            pos += 1;
            while word(c.flags(pos)) {
                pos += 1;
            }
            c.add(pos);
            continue;
        }
        // \p{N}{1,digits}
        if flags.is_number() {
            let mut ini = pos;
            while c.flags(pos).is_number() {
                pos += 1;
                if pos - ini >= digits {
                    c.add(pos);
                    ini = pos;
                }
            }
            c.add(pos);
            continue;
        }
        // <space>?[^\s\p{L}\p{N}]+[\r\n]*
        let mut f2 = if cpt == u32::from(b' ') {
            c.flags(pos + 1)
        } else {
            flags
        };
        let other = |f: Flags| !(f.is_whitespace() || word(f) || f.is_number());
        if other(f2) && flags.is_some() {
            pos += usize::from(cpt == u32::from(b' '));
            while other(f2) && f2.is_some() {
                pos += 1;
                f2 = c.flags(pos);
            }
            while is_nl(c.cpt(pos)) {
                pos += 1;
            }
            c.add(pos);
            continue;
        }
        let mut n_ws = 0;
        let mut last_nl_end = 0;
        while c.flags(pos + n_ws).is_whitespace() {
            if is_nl(c.cpt(pos + n_ws)) {
                last_nl_end = pos + n_ws + 1;
            }
            n_ws += 1;
        }
        // \s*[\r\n]+
        if last_nl_end > 0 {
            pos = last_nl_end;
            c.add(pos);
            continue;
        }
        pos = c.whitespace(pos, n_ws);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::PreType;

    fn split(pre: PreType, text: &str) -> Vec<String> {
        let cpts: Vec<u32> = text.chars().map(u32::from).collect();
        let lens = PreTokenizer::for_type(pre).split(&cpts);
        let mut chars = text.chars();
        lens.iter()
            .map(|&n| chars.by_ref().take(n).collect())
            .collect()
    }

    #[test]
    fn gpt2_splits_words_numbers_and_spaces() {
        assert_eq!(
            split(PreType::Gpt2, "Hello world's  123 !!\n\n x"),
            ["Hello", " world", "'s", " ", " 123", " !!", "\n\n", " x"]
        );
    }

    #[test]
    fn llama3_groups_digits_by_three_and_keeps_newlines_together() {
        assert_eq!(
            split(PreType::Llama3, "I'M 12345 ok?\n\n  end"),
            ["I", "'M", " ", "123", "45", " ok", "?\n\n", " ", " end"]
        );
        assert_eq!(split(PreType::Qwen2, "a 123"), ["a", " ", "1", "2", "3"]);
    }

    #[test]
    fn default_pipeline_isolates_punctuation_runs_and_digit_triples() {
        assert_eq!(
            split(PreType::Default, "a+=b 12345"),
            ["a", "+=", "b", " ", "123", "45"]
        );
        assert_eq!(split(PreType::Gemma4, "a b\n\nc"), ["a b", "\n\n", "c"]);
    }
}
