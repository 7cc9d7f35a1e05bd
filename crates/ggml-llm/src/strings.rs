//! Many short byte strings in two allocations — their bytes end to end and where each ends —
//! with an optional index from a string to its number (at most `u32::MAX` strings: token ids). A vocabulary of 262144 tokens kept
//! as one `Vec<u8>` per text (and again as the keys of a `HashMap`) costs about 40 MB of heap
//! in small allocations; here its texts and index take under 5 MB.

/// A slot of the index that holds no string.
const EMPTY: u32 = u32::MAX;

/// Byte strings numbered from 0 in the order they were pushed.
#[derive(Clone, Debug, Default)]
pub(crate) struct Strings {
    bytes: Vec<u8>,
    /// `ends[i]`: one past the last byte of string `i` (it starts at `ends[i - 1]`, or 0).
    ends: Vec<usize>,
    /// Open addressing by FNV-1a hash, linear probing: string numbers, or [`EMPTY`]. Its length
    /// is a power of two at least twice the number of strings; empty until [`Strings::index`].
    slots: Vec<u32>,
}

/// FNV-1a, 64 bits.
fn hash(s: &[u8]) -> u64 {
    s.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Strings {
    /// Room for `n` strings of `bytes` bytes in all.
    pub(crate) fn with_capacity(n: usize, bytes: usize) -> Strings {
        Strings {
            bytes: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(n),
            slots: Vec::new(),
        }
    }

    /// Appends `s` as the next string.
    pub(crate) fn push(&mut self, s: &[u8]) {
        self.bytes.extend_from_slice(s);
        self.ends.push(self.bytes.len());
    }

    /// Number of strings.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Bytes of all the strings.
    pub(crate) fn n_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// String `i`; `None` past the end.
    pub(crate) fn get(&self, i: usize) -> Option<&[u8]> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some(&self.bytes[start..end])
    }

    /// Frees the room reserved beyond the strings.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
        self.ends.shrink_to_fit();
    }

    /// Builds the index used by [`Strings::find`]; of equal strings the first is found.
    /// Returns the number of distinct strings.
    pub(crate) fn index(&mut self) -> usize {
        let n_slots = (2 * self.len()).max(2).next_power_of_two();
        let mut slots = vec![EMPTY; n_slots];
        let mut distinct = 0;
        for i in 0..self.len() {
            let s = self.get(i).unwrap_or_default();
            let mut at = hash(s) as usize & (n_slots - 1);
            loop {
                match slots[at] {
                    EMPTY => {
                        slots[at] = i as u32;
                        distinct += 1;
                        break;
                    }
                    j if self.get(j as usize) == Some(s) => break,
                    _ => at = (at + 1) & (n_slots - 1),
                }
            }
        }
        self.slots = slots;
        distinct
    }

    /// The number of the string equal to `s` (the first of equal ones); `None` when there is
    /// none or the index was not built.
    pub(crate) fn find(&self, s: &[u8]) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut at = hash(s) as usize & mask;
        loop {
            match self.slots[at] {
                EMPTY => return None,
                j if self.get(j as usize) == Some(s) => return Some(j),
                _ => at = (at + 1) & mask,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_stored_end_to_end_and_found_by_value() {
        let mut s = Strings::with_capacity(4, 8);
        for t in [b"ab".as_slice(), b"", b"c", b"ab", b"\xe2\x96\x81x"] {
            s.push(t);
        }
        assert_eq!(s.len(), 5);
        assert_eq!(s.get(0), Some(b"ab".as_slice()));
        assert_eq!(s.get(1), Some(b"".as_slice()));
        assert_eq!(s.get(4), Some("\u{2581}x".as_bytes()));
        assert_eq!(s.get(5), None);
        assert_eq!(s.find(b"ab"), None, "no index yet");
        // "ab" twice: four distinct, the first one found.
        assert_eq!(s.index(), 4);
        assert_eq!(s.find(b"ab"), Some(0));
        assert_eq!(s.find(b""), Some(1));
        assert_eq!(s.find(b"c"), Some(2));
        assert_eq!(s.find("\u{2581}x".as_bytes()), Some(4));
        assert_eq!(s.find(b"abc"), None);
    }

    #[test]
    fn a_large_index_finds_every_string() {
        let mut s = Strings::default();
        for i in 0..100_000u32 {
            s.push(format!("tok{i}").as_bytes());
        }
        assert_eq!(s.index(), 100_000);
        for i in (0..100_000u32).step_by(997) {
            assert_eq!(s.find(format!("tok{i}").as_bytes()), Some(i));
        }
        assert_eq!(s.find(b"tok100000"), None);
        assert_eq!(Strings::default().index(), 0);
        assert_eq!(Strings::default().find(b"x"), None);
    }
}
