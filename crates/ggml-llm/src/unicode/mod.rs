//! The Unicode facts the tokenizers need, with llama.cpp's conventions (`src/unicode.cpp`):
//! code point classes, simple lowercase, the first code point of a canonical decomposition,
//! UTF-8 decoding that turns each bad byte into U+FFFD, and GPT-2's byte-to-character map.

mod tables;

/// The class flags of one code point (`unicode_cpt_flags`): one general-category class bit, and
/// [`Flags::WHITESPACE`] for `\s`. All zero means "outside the text" (the pre-tokenizers' sentinel).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Flags(u16);

impl Flags {
    const NUMBER: u16 = 0x02;
    const LETTER: u16 = 0x04;
    const MARK: u16 = 0x10;
    const PUNCTUATION: u16 = 0x20;
    const SYMBOL: u16 = 0x40;
    const CONTROL: u16 = 0x80;
    const WHITESPACE: u16 = 0x100;
    /// Unassigned code points, and values past U+10FFFF.
    const UNDEFINED: Flags = Flags(0x01);

    /// The flags of `cp`.
    pub(crate) fn of(cp: u32) -> Flags {
        if cp >= 0x11_0000 {
            return Flags::UNDEFINED;
        }
        let i = tables::CLASS_RANGES.partition_point(|&(start, _)| start <= cp) - 1;
        let class = u16::from(tables::CLASS_RANGES[i].1);
        Flags(
            class
                | if is_whitespace(cp) {
                    Flags::WHITESPACE
                } else {
                    0
                },
        )
    }

    /// `\p{N}`.
    pub(crate) fn is_number(self) -> bool {
        self.0 & Flags::NUMBER != 0
    }
    /// `\p{L}`.
    pub(crate) fn is_letter(self) -> bool {
        self.0 & Flags::LETTER != 0
    }
    /// `\p{M}`.
    pub(crate) fn is_mark(self) -> bool {
        self.0 & Flags::MARK != 0
    }
    /// `\p{P}`.
    pub(crate) fn is_punctuation(self) -> bool {
        self.0 & Flags::PUNCTUATION != 0
    }
    /// `\p{S}`.
    pub(crate) fn is_symbol(self) -> bool {
        self.0 & Flags::SYMBOL != 0
    }
    /// `\p{C}` (control, format, private use, surrogate).
    pub(crate) fn is_control(self) -> bool {
        self.0 & Flags::CONTROL != 0
    }
    /// `\s`.
    pub(crate) fn is_whitespace(self) -> bool {
        self.0 & Flags::WHITESPACE != 0
    }
    /// Whether the position was inside the text at all (llama.cpp's `as_uint() != 0`).
    pub(crate) fn is_some(self) -> bool {
        self.0 != 0
    }
}

/// The `White_Space` property (PropList.txt), as llama.cpp lists it.
fn is_whitespace(cp: u32) -> bool {
    matches!(cp, 0x09..=0x0D | 0x20 | 0x85 | 0xA0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029
        | 0x202F | 0x205F | 0x3000)
}

/// The simple lowercase mapping of `cp` (`unicode_tolower`), `cp` itself when it has none.
pub(crate) fn to_lower(cp: u32) -> u32 {
    match tables::LOWERCASE.binary_search_by_key(&cp, |&(c, _)| c) {
        Ok(i) => tables::LOWERCASE[i].1,
        Err(_) => cp,
    }
}

/// The first code point of `cp`'s canonical decomposition (llama.cpp's `unicode_cpts_normalize_nfd`
/// keeps only that one: the base letter without its accents).
pub(crate) fn nfd_first(cp: u32) -> u32 {
    let i = tables::NFD_FIRST.partition_point(|&(first, _, _)| first <= cp);
    match i.checked_sub(1).map(|i| tables::NFD_FIRST[i]) {
        Some((first, last, nfd)) if first <= cp && cp <= last => nfd,
        _ => cp,
    }
}

/// The byte length a UTF-8 sequence with lead byte `b` claims (`unicode_len_utf8`; 1 for a stray
/// continuation byte).
pub(crate) fn utf8_len(b: u8) -> usize {
    match b >> 4 {
        0xC | 0xD => 2,
        0xE => 3,
        0xF => 4,
        _ => 1,
    }
}

/// The replacement character that stands for each byte of malformed UTF-8.
const REPLACEMENT: u32 = 0xFFFD;

/// Decodes one code point at `bytes[*pos..]` as llama.cpp's `unicode_cpt_from_utf8` does (no
/// check for overlong forms or surrogates), advancing `pos`; `None` for a malformed sequence.
fn decode_one(bytes: &[u8], pos: &mut usize) -> Option<u32> {
    let b0 = bytes[*pos];
    let n = match b0 {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return None,
    };
    let tail = bytes.get(*pos + 1..*pos + n)?;
    if tail.iter().any(|&b| b & 0xC0 != 0x80) {
        return None;
    }
    let lead = u32::from(b0) & [0x7F, 0x1F, 0x0F, 0x07][n - 1];
    let cp = tail
        .iter()
        .fold(lead, |acc, &b| (acc << 6) | u32::from(b & 0x3F));
    *pos += n;
    Some(cp)
}

/// The code points of `bytes`; each byte that does not start a well-formed sequence becomes
/// U+FFFD (`unicode_cpts_from_utf8`).
pub(crate) fn decode_utf8(bytes: &[u8]) -> Vec<u32> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut pos = 0;
    while pos < bytes.len() {
        match decode_one(bytes, &mut pos) {
            Some(cp) => out.push(cp),
            None => {
                out.push(REPLACEMENT);
                pos += 1;
            }
        }
    }
    out
}

/// Appends the UTF-8 encoding of `cp` as `unicode_cpt_to_utf8` does (surrogates get their
/// three-byte form; a value past U+10FFFF, which only malformed 4-byte input yields, becomes
/// U+FFFD).
pub(crate) fn push_utf8(cp: u32, out: &mut Vec<u8>) {
    let cp = if cp > 0x10_FFFF { REPLACEMENT } else { cp };
    let cont = |shift: u32| 0x80 | ((cp >> shift) & 0x3F) as u8;
    match cp {
        0..=0x7F => out.push(cp as u8),
        0x80..=0x7FF => out.extend_from_slice(&[0xC0 | (cp >> 6) as u8, cont(0)]),
        0x800..=0xFFFF => out.extend_from_slice(&[0xE0 | (cp >> 12) as u8, cont(6), cont(0)]),
        _ => out.extend_from_slice(&[0xF0 | (cp >> 18) as u8, cont(12), cont(6), cont(0)]),
    }
}

/// Whether GPT-2's byte map keeps byte `x` as the character of the same value.
const fn printable(x: u8) -> bool {
    matches!(x, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// GPT-2's stand-in characters for the 68 other bytes, in byte order: U+0100, U+0101, …
const SHIFTED: [u8; 68] = {
    let mut out = [0u8; 68];
    let (mut b, mut n) = (0usize, 0usize);
    while b < 256 {
        if !printable(b as u8) {
            out[n] = b as u8;
            n += 1;
        }
        b += 1;
    }
    out
};

/// GPT-2's printable stand-in for byte `b`: the printable Latin-1 bytes stand for themselves,
/// the other 68 take U+0100, U+0101, … in byte order (`unicode_byte_to_utf8`).
pub(crate) fn byte_to_char(b: u8) -> u32 {
    if printable(b) {
        return u32::from(b);
    }
    256 + SHIFTED.iter().position(|&x| x == b).unwrap_or(0) as u32
}

/// The byte whose GPT-2 stand-in is `cp` (`unicode_utf8_to_byte`), if any.
pub(crate) fn char_to_byte(cp: u32) -> Option<u8> {
    match cp {
        0..=255 if printable(cp as u8) => Some(cp as u8),
        256..=323 => Some(SHIFTED[(cp - 256) as usize]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_of_ascii_and_beyond() {
        assert!(Flags::of('a' as u32).is_letter());
        assert!(Flags::of('7' as u32).is_number());
        assert!(Flags::of('!' as u32).is_punctuation());
        assert!(Flags::of('$' as u32).is_symbol());
        assert!(Flags::of(' ' as u32).is_whitespace());
        assert!(Flags::of(0x3000).is_whitespace());
        assert!(Flags::of(0x0301).is_mark());
        assert!(Flags::of(0x200D).is_control());
        assert!(Flags::of(0x4E2D).is_letter());
        assert!(Flags::of(0x1F600).is_symbol());
        assert!(!Flags::of(0x0378).is_letter() && Flags::of(0x0378).is_some());
        assert!(!Flags::default().is_some());
    }

    #[test]
    fn lowercase_and_decomposition() {
        assert_eq!(to_lower('A' as u32), 'a' as u32);
        assert_eq!(to_lower(0x00C4), 0x00E4);
        assert_eq!(to_lower(0x0130), 'i' as u32);
        assert_eq!(to_lower('a' as u32), 'a' as u32);
        assert_eq!(nfd_first(0x00E4), 'a' as u32);
        assert_eq!(nfd_first(0x1EC7), 'e' as u32);
        assert_eq!(nfd_first(0xAC00), 0x1100);
        assert_eq!(nfd_first('x' as u32), 'x' as u32);
    }

    #[test]
    fn utf8_decoding_replaces_each_bad_byte() {
        assert_eq!(
            decode_utf8("aä€😀".as_bytes()),
            vec![0x61, 0xE4, 0x20AC, 0x1F600]
        );
        assert_eq!(decode_utf8(&[0x61, 0xE2, 0x82]), vec![0x61, 0xFFFD, 0xFFFD]);
        assert_eq!(decode_utf8(&[0x80, 0x41]), vec![0xFFFD, 0x41]);
        let mut out = Vec::new();
        push_utf8(0x20AC, &mut out);
        push_utf8(0, &mut out);
        assert_eq!(out, vec![0xE2, 0x82, 0xAC, 0]);
    }

    #[test]
    fn gpt2_byte_map_is_a_bijection() {
        assert_eq!(byte_to_char(b' '), 0x120);
        assert_eq!(byte_to_char(b'\n'), 0x10A);
        assert_eq!(byte_to_char(b'a'), 'a' as u32);
        assert_eq!(byte_to_char(0xAD), 0x143);
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
        }
        assert_eq!(char_to_byte(0x144), None);
    }
}
