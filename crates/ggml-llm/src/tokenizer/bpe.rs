//! Byte-level BPE (`llm_tokenizer_bpe_session`): the pre-tokenizer splits the text into words;
//! each word (in GPT-2's byte-to-character encoding, or raw UTF-8 for SentencePiece-style BPE)
//! starts as UTF-8 characters and the adjacent pair with the lowest merge rank is merged
//! (leftmost first on ties) until no pair has a rank. A final symbol that is not a token is
//! emitted byte by byte.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::{bytes, merge, split_chars, Symbol};
use crate::unicode;
use crate::vocab::Vocab;

struct Bigram {
    left: usize,
    right: usize,
    rank: u32,
    /// The merged bytes, to tell an outdated entry from a live one.
    text: Vec<u8>,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // Lowest rank first; on a tie, the leftmost pair first.
        other.rank.cmp(&self.rank).then(other.left.cmp(&self.left))
    }
}
order_from_cmp!(Bigram);

fn add_bigram(
    vocab: &Vocab,
    word: &[u8],
    symbols: &[Symbol],
    queue: &mut BinaryHeap<Bigram>,
    left: Option<usize>,
    right: Option<usize>,
) {
    let (Some(left), Some(right)) = (left, right) else {
        return;
    };
    let (l, r) = (bytes(word, &symbols[left]), bytes(word, &symbols[right]));
    if let Some(rank) = vocab.bpe_rank(l, r) {
        queue.push(Bigram {
            left,
            right,
            rank,
            text: [l, r].concat(),
        });
    }
}

/// The symbols of one word after all merges.
fn merge_word(vocab: &Vocab, word: &[u8]) -> Vec<Symbol> {
    let whole = Symbol {
        start: 0,
        len: word.len(),
        prev: None,
        next: None,
    };
    if vocab.ignore_merges() && vocab.text_to_token(word).is_some() {
        return vec![whole];
    }
    if vocab.pre_type() == crate::vocab::PreType::Gemma4
        && word.iter().all(|&b| b == b'\n')
        && vocab.text_to_token(word).is_some()
    {
        return vec![whole];
    }
    let mut symbols = split_chars(word);
    let mut queue = BinaryHeap::new();
    for i in 1..symbols.len() {
        add_bigram(vocab, word, &symbols, &mut queue, Some(i - 1), Some(i));
    }
    while let Some(b) = queue.pop() {
        let (l, r) = (symbols[b.left], symbols[b.right]);
        if l.len == 0 || r.len == 0 || [bytes(word, &l), bytes(word, &r)].concat() != b.text {
            continue;
        }
        merge(&mut symbols, b.left, b.right);
        let (prev, next) = (symbols[b.left].prev, symbols[b.left].next);
        add_bigram(vocab, word, &symbols, &mut queue, prev, Some(b.left));
        add_bigram(vocab, word, &symbols, &mut queue, Some(b.left), next);
    }
    symbols.retain(|s| s.len > 0);
    symbols
}

/// Appends the tokens of `text` to `out`.
pub(crate) fn tokenize(vocab: &Vocab, text: &[u8], out: &mut Vec<u32>) {
    let cpts = unicode::decode_utf8(text);
    let byte_level = vocab.pre_type() != crate::vocab::PreType::Gemma4;
    let mut start = 0;
    let mut word = Vec::new();
    for len in vocab.pre_tokenizer().split(&cpts) {
        word.clear();
        let mut utf8 = Vec::new();
        for &cp in &cpts[start..start + len] {
            unicode::push_utf8(cp, &mut utf8);
        }
        start += len;
        if byte_level {
            for &b in &utf8 {
                unicode::push_utf8(unicode::byte_to_char(b), &mut word);
            }
        } else {
            word = utf8;
        }
        for s in merge_word(vocab, &word) {
            let piece = bytes(&word, &s);
            match vocab.text_to_token(piece) {
                Some(id) => out.push(id),
                None => out.extend(piece.iter().filter_map(|&b| {
                    if byte_level {
                        vocab.text_to_token(&[b])
                    } else {
                        vocab.text_to_token(format!("<0x{b:02X}>").as_bytes())
                    }
                })),
            }
        }
    }
}
