//! WordPiece (`llm_tokenizer_wpm_session`): the text is normalized as BERT's normalizer does
//! (optionally NFD accent stripping and lowercasing), split on whitespace, and punctuation, ASCII
//! symbols and CJK ideographs become words of their own; each word, with the `▁` word-start
//! marker, is covered left to right by the longest vocabulary tokens, and a word that cannot be
//! covered becomes the unknown token.

use crate::unicode::{self, Flags};
use crate::vocab::Vocab;
use crate::Result;

/// The CJK ranges BERT isolates (Hugging Face's list, with its 0x2B920 start kept as llama.cpp
/// keeps it).
fn is_chinese_char(cp: u32) -> bool {
    matches!(cp, 0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B920..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// BERT's normalization and word split.
fn words(text: &[u8], lowercase: bool, strip_accents: bool) -> Vec<Vec<u8>> {
    let mut words = vec![Vec::new()];
    for cp in unicode::decode_utf8(text) {
        let cp = if strip_accents {
            unicode::nfd_first(cp)
        } else {
            cp
        };
        let f = Flags::of(cp);
        if f.is_whitespace() {
            if !words.last().is_some_and(Vec::is_empty) {
                words.push(Vec::new());
            }
            continue;
        }
        if cp == 0 || cp == 0xFFFD || f.is_control() || (strip_accents && f.is_mark()) {
            continue;
        }
        let mut s = Vec::new();
        unicode::push_utf8(if lowercase { unicode::to_lower(cp) } else { cp }, &mut s);
        if f.is_punctuation() || (cp < 0x7F && f.is_symbol()) || is_chinese_char(cp) {
            if !words.last().is_some_and(Vec::is_empty) {
                words.push(Vec::new());
            }
            *words.last_mut().expect("never empty") = s;
            words.push(Vec::new());
        } else {
            words.last_mut().expect("never empty").extend_from_slice(&s);
        }
    }
    words.retain(|w| !w.is_empty());
    words
}

/// Appends the tokens of `text` to `out`.
pub(crate) fn tokenize(vocab: &Vocab, text: &[u8], out: &mut Vec<u32>) -> Result<()> {
    let (lowercase, strip_accents) = vocab.normalizer();
    for word in words(text, lowercase, strip_accents) {
        let marked = ["\u{2581}".as_bytes(), &word].concat();
        let n = marked.len();
        let before = out.len();
        let mut i = 0;
        while i < n {
            let longest = (i + 1..=n.min(i + vocab.max_token_len() + 1))
                .rev()
                .find_map(|j| vocab.text_to_token(&marked[i..j]).map(|id| (id, j)));
            match longest {
                Some((id, j)) => {
                    out.push(id);
                    i = j;
                }
                None => {
                    out.truncate(before);
                    break;
                }
            }
        }
        if out.len() == before {
            out.push(vocab.unk().ok_or_else(|| {
                crate::Error::Vocab(format!(
                    "word {:?} has no WordPiece cover and the vocabulary has no unknown token",
                    String::from_utf8_lossy(&word)
                ))
            })?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bert_normalization_splits_punctuation_and_strips_accents() {
        let w = words("Héllo, WORLD! 中文 a\u{0301}b".as_bytes(), true, true);
        let w: Vec<String> = w
            .into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect();
        assert_eq!(w, ["hello", ",", "world", "!", "中", "文", "ab"]);
        let w = words("Héllo".as_bytes(), false, false);
        assert_eq!(w, [b"H\xc3\xa9llo".to_vec()]);
    }
}
