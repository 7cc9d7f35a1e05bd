//! The tokenizer algorithms, one module each, as llama.cpp's `src/llama-vocab.cpp` runs them:
//! [`spm`] (SentencePiece-style bigram merging by score, `llama` vocabularies), [`bpe`]
//! (byte-level BPE by merge rank after a [`pretokenize`] split, `gpt2`/`gemma4` vocabularies),
//! [`wpm`] (WordPiece longest match, `bert` vocabularies).

/// `PartialOrd`, `PartialEq` and `Eq` for a queue entry from its `Ord`, so that the heap order
/// is exactly the one `Ord::cmp` defines.
macro_rules! order_from_cmp {
    ($t:ty) => {
        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                self.cmp(other) == std::cmp::Ordering::Equal
            }
        }
        impl Eq for $t {}
    };
}

pub(crate) mod bpe;
pub(crate) mod pretokenize;
pub(crate) mod spm;
pub(crate) mod wpm;

/// One symbol of a word being merged: a byte range and its neighbours in the chain
/// (`llm_symbol`). A symbol merged into its left neighbour has `len == 0`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Symbol {
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) prev: Option<usize>,
    pub(crate) next: Option<usize>,
}

/// The symbols of a byte string, one per UTF-8 character (a truncated sequence at the end is
/// one short symbol), chained left to right.
pub(crate) fn split_chars(text: &[u8]) -> Vec<Symbol> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let len = crate::unicode::utf8_len(text[start]).min(text.len() - start);
        let i = out.len();
        out.push(Symbol {
            start,
            len,
            prev: i.checked_sub(1),
            next: (start + len < text.len()).then_some(i + 1),
        });
        start += len;
    }
    out
}

/// Merges symbol `right` into `left`, its right neighbour, and unlinks `right`.
pub(crate) fn merge(symbols: &mut [Symbol], left: usize, right: usize) {
    let (r_len, r_next) = (symbols[right].len, symbols[right].next);
    symbols[left].len += r_len;
    symbols[right].len = 0;
    symbols[left].next = r_next;
    if let Some(n) = r_next {
        symbols[n].prev = Some(left);
    }
}

/// The bytes of symbol `s` of `text`.
pub(crate) fn bytes<'t>(text: &'t [u8], s: &Symbol) -> &'t [u8] {
    &text[s.start..s.start + s.len]
}
