//! Small vocabularies written in memory: the algorithms' rules (SentencePiece merging by score
//! and byte fallback, BPE ranks, WordPiece longest match), special tokens, detokenization, and
//! the errors for missing or malformed vocabularies.

use ggml::gguf::{Array, GgufFile, GgufWriter, Value};
use ggml_llm::{Error, Vocab, VocabKind};

fn file(kv: &[(&str, Value)]) -> GgufFile {
    let mut w = GgufWriter::new();
    for (k, v) in kv {
        w.set(k, v.clone()).unwrap();
    }
    GgufFile::from_vec(w.to_bytes().unwrap()).unwrap()
}

fn strings(v: &[&str]) -> Value {
    Value::Array(Array::from(v.to_vec()))
}

/// `<unk> <s> </s>`, the 256 byte tokens, then `extra` normal tokens with their scores.
fn spm(extra: &[(&str, f32)]) -> Vocab {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2i32, 3, 3];
    let mut scores = vec![0.0f32; 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    for (t, s) in extra {
        tokens.push(t.to_string());
        types.push(1);
        scores.push(*s);
    }
    Vocab::from_gguf(&file(&[
        ("tokenizer.ggml.model", "llama".into()),
        ("tokenizer.ggml.tokens", Value::Array(Array::from(tokens))),
        ("tokenizer.ggml.scores", scores.into()),
        ("tokenizer.ggml.token_type", types.into()),
    ]))
    .unwrap()
}

const FIRST: u32 = 3 + 256;

#[test]
fn spm_merges_the_best_scoring_pair_first() {
    // `▁`, `a`, `b`, then `▁a` and `ab` scored `pair`, then `more`.
    let with = |pair: [f32; 2], more: &[(&'static str, f32)]| {
        let mut t = vec![
            ("▁", -5.0),
            ("a", -5.0),
            ("b", -5.0),
            ("▁a", pair[0]),
            ("ab", pair[1]),
        ];
        t.extend_from_slice(more);
        spm(&t)
    };
    // "▁a" scores below "ab": ▁ a b → ▁ ab → ▁ab.
    let v = with([-2.0, -1.0], &[("▁ab", -3.0)]);
    assert_eq!(v.kind(), VocabKind::Spm);
    assert_eq!(v.tokenize("ab", false, false).unwrap(), [FIRST + 5]);
    // Without "▁ab" the merge stops at ▁ + ab; with "▁a" preferred it is ▁a + b.
    let v = with([-2.0, -1.0], &[]);
    assert_eq!(v.tokenize("ab", false, false).unwrap(), [FIRST, FIRST + 4]);
    let v = with([-1.0, -2.0], &[]);
    assert_eq!(
        v.tokenize("ab", false, false).unwrap(),
        [FIRST + 3, FIRST + 2]
    );
}

#[test]
fn spm_falls_back_to_bytes_and_adds_bos() {
    let v = spm(&[("▁", -5.0), ("a", -5.0)]);
    // "ć" is not a token: its two UTF-8 bytes are.
    assert_eq!(
        v.tokenize("ać", true, false).unwrap(),
        [1, FIRST, FIRST + 1, 3 + 0xC4, 3 + 0x87]
    );
    // The space prefix is removed from the first piece, except after a removed BOS (as
    // llama.cpp's detokenize does).
    assert_eq!(
        v.detokenize(&[FIRST, FIRST + 1, 3 + 0xC4, 3 + 0x87], true, false)
            .unwrap(),
        "ać"
    );
    assert_eq!(
        v.detokenize(&[1, FIRST, FIRST + 1, 3 + 0xC4, 3 + 0x87], true, false)
            .unwrap(),
        " ać"
    );
    assert_eq!(v.token_to_piece(3 + 0xC4, false).unwrap(), [0xC4]);
    assert_eq!(v.token_to_piece(FIRST, false).unwrap(), b" ");
}

#[test]
fn special_token_text_is_parsed_only_when_asked() {
    let v = spm(&[
        ("▁", -5.0),
        ("a", -5.0),
        ("<", -9.0),
        ("/", -9.0),
        ("s", -9.0),
        (">", -9.0),
    ]);
    // Parsed: the text after a special token gets the space prefix again.
    assert_eq!(
        v.tokenize("a</s>a", false, true).unwrap(),
        [FIRST, FIRST + 1, 2, FIRST, FIRST + 1]
    );
    let plain = v.tokenize("a</s>a", false, false).unwrap();
    assert_eq!(plain.len(), 7);
    assert!(!plain.contains(&2));
    // Control tokens render only when asked.
    assert_eq!(v.token_to_piece(2, false).unwrap(), b"");
    assert_eq!(v.token_to_piece(2, true).unwrap(), b"</s>");
    assert_eq!(v.detokenize(&[2, FIRST + 1], false, true).unwrap(), "</s>a");
    assert!(v.is_eog(2) && !v.is_eog(1));
}

#[test]
fn bpe_merges_by_rank_on_gpt2_byte_characters() {
    let v = Vocab::from_gguf(&file(&[
        ("tokenizer.ggml.model", "gpt2".into()),
        ("tokenizer.ggml.pre", "gpt-2".into()),
        (
            "tokenizer.ggml.tokens",
            strings(&["h", "i", "Ġ", "hi", "Ġhi", "!", "Ġh"]),
        ),
        ("tokenizer.ggml.merges", strings(&["h i", "Ġ hi", "Ġ h"])),
    ]))
    .unwrap();
    // " hi": Ġ h i → (h i has rank 0) Ġ hi → Ġhi; "Ġ h" (rank 2) loses.
    assert_eq!(v.tokenize(" hi!", false, false).unwrap(), [4, 5]);
    assert_eq!(v.token_to_piece(4, false).unwrap(), b" hi");
    assert_eq!(v.detokenize(&[3, 4, 5], false, false).unwrap(), "hi hi!");
}

#[test]
fn wordpiece_takes_the_longest_tokens_and_marks_unknown_words() {
    let v = Vocab::from_gguf(&file(&[
        ("tokenizer.ggml.model", "bert".into()),
        (
            "tokenizer.ggml.tokens",
            strings(&[
                "[PAD]", "[UNK]", "[CLS]", "[SEP]", "▁play", "ing", "▁hello", "▁p", "▁,",
            ]),
        ),
        (
            "tokenizer.ggml.token_type",
            vec![3i32, 2, 3, 3, 1, 1, 1, 1, 1].into(),
        ),
        ("tokenizer.ggml.unknown_token_id", 1u32.into()),
        ("tokenizer.ggml.bos_token_id", 2u32.into()),
        ("tokenizer.ggml.seperator_token_id", 3u32.into()),
        ("tokenizer.ggml.padding_token_id", 0u32.into()),
    ]))
    .unwrap();
    assert_eq!(
        v.tokenize("Playing, HELLO xyz", true, false).unwrap(),
        [2, 4, 5, 8, 6, 1, 3]
    );
    // Word-start markers become spaces; the space before the comma is cleaned away.
    assert_eq!(
        v.detokenize(&[4, 5, 8, 6], false, false).unwrap(),
        " playing, hello"
    );
}

#[test]
fn missing_or_malformed_vocabularies_are_errors_naming_the_key() {
    let err = |kv: &[(&str, Value)]| Vocab::from_gguf(&file(kv)).unwrap_err().to_string();
    assert!(err(&[]).contains("tokenizer.ggml.model"));
    let e = Vocab::from_gguf(&file(&[("tokenizer.ggml.model", "nope".into())])).unwrap_err();
    assert!(
        matches!(e, Error::Unsupported(ref m) if m.contains("\"nope\"")),
        "{e}"
    );
    assert!(err(&[("tokenizer.ggml.model", "llama".into())]).contains("tokenizer.ggml.tokens"));
    assert!(err(&[
        ("tokenizer.ggml.model", "llama".into()),
        ("tokenizer.ggml.tokens", vec![1u32, 2].into()),
    ])
    .contains("not an array of strings"));
    assert!(err(&[
        ("tokenizer.ggml.model", "llama".into()),
        ("tokenizer.ggml.tokens", strings(&["a", "b"])),
        ("tokenizer.ggml.scores", vec![0.5f32].into()),
    ])
    .contains("tokenizer.ggml.scores has 1 entries for 2 tokens"));
    assert!(err(&[
        ("tokenizer.ggml.model", "gpt2".into()),
        ("tokenizer.ggml.tokens", strings(&["a"])),
    ])
    .contains("tokenizer.ggml.merges"));
    let e = err(&[
        ("tokenizer.ggml.model", "gpt2".into()),
        ("tokenizer.ggml.pre", "martian".into()),
        ("tokenizer.ggml.tokens", strings(&["a"])),
        ("tokenizer.ggml.merges", strings(&[])),
    ]);
    assert!(e.contains("\"martian\""), "{e}");
    assert!(err(&[
        ("tokenizer.ggml.model", "llama".into()),
        ("tokenizer.ggml.tokens", strings(&["a"])),
        ("tokenizer.ggml.add_bos_token", 1u32.into()),
    ])
    .contains("not a bool"));
    let v = spm(&[]);
    let e = v.token_to_piece(100_000, true).unwrap_err().to_string();
    assert!(e.contains("100000") && e.contains("259"), "{e}");
}
