//! A bounds-checked little-endian cursor over untrusted bytes. Every failure is an
//! [`Error::Format`] naming the field (supplied lazily by the caller) and the byte offset.

use crate::error::Error;

/// Builds the error for `field` at byte `offset`: `"{field}: {problem} at offset {offset}"`.
pub(crate) fn format_err(field: &str, problem: impl std::fmt::Display, offset: usize) -> Error {
    Error::Format(format!("{field}: {problem} at offset {offset}"))
}

/// Reads forward through a byte slice.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// A field label, computed only when an error needs it.
pub(crate) type Label<'l> = &'l dyn Fn() -> String;

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// Current offset from the start of the buffer.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left after the current offset.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes, or an error naming `label` when fewer remain.
    pub(crate) fn take(&mut self, n: usize, label: Label) -> Result<&'a [u8], Error> {
        if n > self.remaining() {
            return Err(format_err(
                &label(),
                format_args!(
                    "needs {n} bytes but the file has {} left (truncated)",
                    self.remaining()
                ),
                self.pos,
            ));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, label: Label) -> Result<[u8; N], Error> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, label)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self, label: Label) -> Result<u8, Error> {
        Ok(self.array::<1>(label)?[0])
    }

    pub(crate) fn u16(&mut self, label: Label) -> Result<u16, Error> {
        self.array(label).map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self, label: Label) -> Result<u32, Error> {
        self.array(label).map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self, label: Label) -> Result<u64, Error> {
        self.array(label).map(u64::from_le_bytes)
    }

    pub(crate) fn i64(&mut self, label: Label) -> Result<i64, Error> {
        self.array(label).map(i64::from_le_bytes)
    }

    /// Checks that `count` items of at least `min_size` bytes each can fit in what remains,
    /// before anything is allocated for them. `at` is the offset of the count field.
    pub(crate) fn check_fits(
        &self,
        count: u64,
        min_size: u64,
        at: usize,
        label: Label,
        what: &str,
    ) -> Result<(), Error> {
        let need = count.checked_mul(min_size);
        if need.is_none_or(|need| need > self.remaining() as u64) {
            return Err(format_err(
                &label(),
                format_args!(
                    "{what} {count} cannot fit in the {} bytes left (each takes at least {min_size})",
                    self.remaining()
                ),
                at,
            ));
        }
        Ok(())
    }

    /// A u64 length followed by that many bytes, the length capped by `max`.
    pub(crate) fn string_bytes(&mut self, max: u64, label: Label) -> Result<&'a [u8], Error> {
        let at = self.pos;
        let len = self.u64(label)?;
        if len > max {
            return Err(format_err(
                &label(),
                format_args!("string length {len} exceeds the limit of {max} bytes"),
                at,
            ));
        }
        self.check_fits(len, 1, at, label, "string length")?;
        // `len` fits in what remains, so it fits in usize.
        self.take(len as usize, label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_names_field_and_offset() {
        let mut c = Cursor::new(&[1, 0, 0, 0, 9]);
        assert_eq!(c.u32(&|| "a".into()).unwrap(), 1);
        let e = c.u32(&|| "header: n_kv".into()).unwrap_err().to_string();
        assert!(e.contains("header: n_kv") && e.contains("offset 4"), "{e}");
    }

    #[test]
    fn string_length_checked_before_allocation() {
        let mut b = u64::MAX.to_le_bytes().to_vec();
        b.extend_from_slice(b"abc");
        let e = Cursor::new(&b)
            .string_bytes(u64::MAX, &|| "kv 0: key".into())
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot fit") && e.contains("offset 0"), "{e}");
        let mut ok = 3u64.to_le_bytes().to_vec();
        ok.extend_from_slice(b"abc");
        assert_eq!(
            Cursor::new(&ok).string_bytes(64, &|| "s".into()).unwrap(),
            b"abc"
        );
        assert!(Cursor::new(&ok).string_bytes(2, &|| "s".into()).is_err());
    }
}
