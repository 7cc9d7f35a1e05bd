//! SentencePiece-style tokenization (`llm_tokenizer_spm_session`): start from UTF-8
//! characters, repeatedly merge the adjacent pair whose concatenation is the vocabulary token
//! with the highest score (leftmost first on ties), then emit each symbol as its token, or,
//! when it is not one, as the tokens of the two symbols it was merged from, down to byte tokens.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::{bytes, merge, split_chars, Symbol};
use crate::vocab::Vocab;
use crate::Result;

struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    size: usize,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // Highest score first; on a tie, the leftmost pair first.
        self.score
            .total_cmp(&other.score)
            .then(other.left.cmp(&self.left))
    }
}
order_from_cmp!(Bigram);

struct Session<'a> {
    vocab: &'a Vocab,
    text: &'a [u8],
    symbols: Vec<Symbol>,
    queue: BinaryHeap<Bigram>,
    /// The pair each merged text was last built from, to split a non-token back apart.
    rev_merge: HashMap<&'a [u8], (usize, usize)>,
}

impl<'a> Session<'a> {
    fn try_add_bigram(&mut self, left: Option<usize>, right: Option<usize>) {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let (l, r) = (self.symbols[left], self.symbols[right]);
        let text = &self.text[l.start..l.start + l.len + r.len];
        let Some(id) = self.vocab.text_to_token(text) else {
            return;
        };
        self.queue.push(Bigram {
            left,
            right,
            score: self.vocab.score(id),
            size: text.len(),
        });
        self.rev_merge.insert(text, (left, right));
    }

    fn resegment(&self, s: Symbol, out: &mut Vec<u32>) -> Result<()> {
        let text = bytes(self.text, &s);
        if let Some(id) = self.vocab.text_to_token(text) {
            out.push(id);
            return Ok(());
        }
        match self.rev_merge.get(text) {
            Some(&(l, r)) => {
                self.resegment(self.symbols[l], out)?;
                self.resegment(self.symbols[r], out)
            }
            None => {
                for &b in text {
                    out.push(self.vocab.byte_to_token(b)?);
                }
                Ok(())
            }
        }
    }
}

/// Appends the tokens of `text` (already space-escaped) to `out`.
pub(crate) fn tokenize(vocab: &Vocab, text: &[u8], out: &mut Vec<u32>) -> Result<()> {
    let mut s = Session {
        vocab,
        text,
        symbols: split_chars(text),
        queue: BinaryHeap::new(),
        rev_merge: HashMap::new(),
    };
    for i in 1..s.symbols.len() {
        s.try_add_bigram(Some(i - 1), Some(i));
    }
    while let Some(b) = s.queue.pop() {
        let (l, r) = (s.symbols[b.left], s.symbols[b.right]);
        if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
            continue;
        }
        merge(&mut s.symbols, b.left, b.right);
        let prev = s.symbols[b.left].prev;
        let next = s.symbols[b.left].next;
        s.try_add_bigram(prev, Some(b.left));
        s.try_add_bigram(Some(b.left), next);
    }
    let mut i = (!s.symbols.is_empty()).then_some(0);
    while let Some(k) = i {
        s.resegment(s.symbols[k], out)?;
        i = s.symbols[k].next;
    }
    Ok(())
}
