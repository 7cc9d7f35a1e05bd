//! Reading R arguments: handles held in external pointers and scalars or vectors of numbers.
//! Every failure is an `Err` whose message names the argument, and becomes an R error.

use std::sync::{Mutex, MutexGuard};

use extendr_api::prelude::*;
use extendr_api::{Error, Result};

/// What an R external pointer of this package holds: a library handle, or nothing once it was
/// freed. Freeing twice is harmless; using a freed handle is an error naming the argument.
pub struct Slot<T: Send + 'static> {
    handle: Mutex<Option<T>>,
}

impl<T: Send + 'static> Drop for Slot<T> {
    /// The finalizer's drop. During an R callback of the library the handle's drop could wait
    /// for the work that is calling back, so it is deferred to after the callback.
    fn drop(&mut self) {
        if crate::rthread::in_callback() {
            let h = self
                .handle
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(h) = h {
                crate::rthread::defer_drop(Box::new(h));
            }
        }
    }
}

impl<T: Clone + Send + 'static> Slot<T> {
    /// Wraps `handle` in a new R external pointer whose finalizer drops it.
    pub fn wrap(handle: T) -> Robj {
        ExternalPtr::new(Slot {
            handle: Mutex::new(Some(handle)),
        })
        .into()
    }

    fn lock(&self) -> MutexGuard<'_, Option<T>> {
        self.handle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the handle out; later uses of the pointer are errors.
    fn take(&self) -> Option<T> {
        self.lock().take()
    }
}

/// The `Slot<T>` behind `obj`, or an error naming `arg` when `obj` is something else.
fn slot<'a, T: Clone + Send + 'static>(
    obj: &'a Robj,
    arg: &str,
    what: &str,
) -> Result<&'a Slot<T>> {
    if crate::rthread::in_callback() {
        return Err(Error::Other(format!(
            "argument `{arg}`: a {what} cannot be used inside an R function that the library \
             is running (a custom op's or a split function): its computation or allocation is \
             in progress"
        )));
    }
    if !obj.is_external_pointer() {
        return Err(Error::Other(format!(
            "argument `{arg}`: expected a {what} (an external pointer), got an R {:?}",
            obj.rtype()
        )));
    }
    let ptr: &ExternalPtr<Slot<T>> = obj.try_into().map_err(|_| {
        Error::Other(format!(
            "argument `{arg}`: expected a {what}, got another kind of external pointer \
             (or one from an earlier R session)"
        ))
    })?;
    ptr.try_addr()
        .map_err(|_| Error::Other(format!("argument `{arg}`: the {what} pointer is NULL")))
}

/// A clone of the live handle behind `obj`; an error naming `arg` when it is not a `what`
/// handle or was freed.
pub fn handle<T: Clone + Send + 'static>(obj: &Robj, arg: &str, what: &str) -> Result<T> {
    slot::<T>(obj, arg, what)?
        .lock()
        .clone()
        .ok_or_else(|| Error::Other(format!("argument `{arg}`: the {what} was freed")))
}

/// Takes the handle out of `obj` and gives it to `release` (harmless when already freed: then
/// `release` is not called); an error naming `arg` when `obj` is not a `what` handle.
/// The lock is released before `release` runs, which may wait for queued work.
pub fn free<T: Clone + Send + 'static>(
    obj: &Robj,
    arg: &str,
    what: &str,
    release: fn(T),
) -> Result<()> {
    if let Some(h) = slot::<T>(obj, arg, what)?.take() {
        release(h);
    }
    Ok(())
}

/// Takes the live handle out of `obj`, which then reads as freed (ownership passes to the
/// caller); an error naming `arg` when it is not a `what` handle or was freed.
pub fn take<T: Clone + Send + 'static>(obj: &Robj, arg: &str, what: &str) -> Result<T> {
    slot::<T>(obj, arg, what)?
        .take()
        .ok_or_else(|| Error::Other(format!("argument `{arg}`: the {what} was freed")))
}

/// One number given as an R integer or double of length 1, not NA, and whole.
pub fn whole(obj: &Robj, arg: &str) -> Result<f64> {
    let bad = || {
        Error::Other(format!(
            "argument `{arg}`: expected one whole number, got {}",
            describe(obj)
        ))
    };
    if obj.len() != 1 {
        return Err(bad());
    }
    let v = if let Some(i) = obj.as_integer() {
        f64::from(i)
    } else if let Some(d) = obj.as_real() {
        d
    } else {
        return Err(bad());
    };
    if v.is_finite() && v.fract() == 0.0 && !obj.is_na() {
        Ok(v)
    } else {
        Err(bad())
    }
}

/// A whole number in `lo..=hi`.
pub fn int_in(obj: &Robj, arg: &str, lo: f64, hi: f64) -> Result<f64> {
    let v = whole(obj, arg)?;
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(Error::Other(format!(
            "argument `{arg}`: {v} is outside {lo}..={hi}"
        )))
    }
}

/// A tensor dimension: a whole number in `0..=2^53` (R doubles are exact up to there).
pub fn dim(obj: &Robj, arg: &str) -> Result<i64> {
    Ok(int_in(obj, arg, 0.0, 9_007_199_254_740_992.0)? as i64)
}

/// A byte count: a whole, non-negative number.
pub fn bytes(obj: &Robj, arg: &str) -> Result<usize> {
    Ok(int_in(obj, arg, 0.0, 9_007_199_254_740_992.0)? as usize)
}

/// A GGML type code (`GGML_TYPE_*`).
pub fn ggml_type(obj: &Robj, arg: &str) -> Result<ggml::Type> {
    let code = int_in(obj, arg, 0.0, f64::from(u32::MAX))? as u32;
    ggml::Type::from_u32(code)
        .map_err(|e| Error::Other(format!("argument `{arg}`: {}", e.message())))
}

/// `TRUE` or `FALSE`.
pub fn flag(obj: &Robj, arg: &str) -> Result<bool> {
    match obj.as_bool() {
        Some(b) if obj.len() == 1 && !obj.is_na() => Ok(b),
        _ => Err(Error::Other(format!(
            "argument `{arg}`: expected TRUE or FALSE, got {}",
            describe(obj)
        ))),
    }
}

/// A numeric (double or integer) vector as f32 values; NA becomes NaN, as in ggmlR.
pub fn f32s(obj: &Robj, arg: &str) -> Result<Vec<f32>> {
    if let Some(d) = obj.as_real_slice() {
        Ok(d.iter().map(|&v| v as f32).collect())
    } else if let Some(i) = obj.as_integer_slice() {
        Ok(i.iter()
            .map(|&v| if v == i32::MIN { f32::NAN } else { v as f32 })
            .collect())
    } else {
        Err(Error::Other(format!(
            "argument `{arg}`: expected a numeric vector, got {}",
            describe(obj)
        )))
    }
}

/// An integer vector, or a double vector of whole numbers in the i32 range, with no NA.
pub fn i32s(obj: &Robj, arg: &str) -> Result<Vec<i32>> {
    let bad = |i: usize| {
        Error::Other(format!(
            "argument `{arg}`: element {} is NA or not a 32-bit integer",
            i + 1
        ))
    };
    if let Some(v) = obj.as_integer_slice() {
        match v.iter().position(|&x| x == i32::MIN) {
            Some(i) => Err(bad(i)),
            None => Ok(v.to_vec()),
        }
    } else if let Some(d) = obj.as_real_slice() {
        d.iter()
            .enumerate()
            .map(|(i, &x)| {
                let ok = x.fract() == 0.0 && x > f64::from(i32::MIN) && x <= f64::from(i32::MAX);
                if ok {
                    Ok(x as i32)
                } else {
                    Err(bad(i))
                }
            })
            .collect()
    } else {
        Err(Error::Other(format!(
            "argument `{arg}`: expected an integer vector, got {}",
            describe(obj)
        )))
    }
}

/// A short description of an R value for error messages: its type and length.
fn describe(obj: &Robj) -> String {
    format!("an R {:?} of length {}", obj.rtype(), obj.len())
}

/// A library result as an extendr one, the message prefixed with the R function's name.
pub fn lib<T>(fname: &str, r: ggml::Result<T>) -> Result<T> {
    r.map_err(|e| Error::Other(format!("{fname}: {e}")))
}

/// One number given as an R integer or double of length 1, not NA (NaN and infinities pass).
pub fn num(obj: &Robj, arg: &str) -> Result<f64> {
    let v = if obj.len() != 1 || obj.is_na() {
        None
    } else if let Some(i) = obj.as_integer() {
        Some(f64::from(i))
    } else {
        obj.as_real()
    };
    v.ok_or_else(|| {
        Error::Other(format!(
            "argument `{arg}`: expected one number, got {}",
            describe(obj)
        ))
    })
}

/// One number as an `f32` (GGML's `float` arguments).
pub fn f32_arg(obj: &Robj, arg: &str) -> Result<f32> {
    Ok(num(obj, arg)? as f32)
}

/// A whole number in the range of a C `int` (GGML's `int` arguments).
pub fn i32_arg(obj: &Robj, arg: &str) -> Result<i32> {
    Ok(int_in(obj, arg, f64::from(i32::MIN), f64::from(i32::MAX))? as i32)
}

/// A whole number in the range of `int64_t` that R doubles hold exactly.
pub fn i64_arg(obj: &Robj, arg: &str) -> Result<i64> {
    const EXACT: f64 = 9_007_199_254_740_992.0;
    Ok(int_in(obj, arg, -EXACT, EXACT)? as i64)
}

/// One string, not NA.
pub fn string(obj: &Robj, arg: &str) -> Result<String> {
    match obj.as_str() {
        Some(s) if obj.len() == 1 && !obj.is_na() => Ok(s.to_string()),
        _ => Err(Error::Other(format!(
            "argument `{arg}`: expected one string, got {}",
            describe(obj)
        ))),
    }
}

/// `NULL` or one string.
pub fn opt_string(obj: &Robj, arg: &str) -> Result<Option<String>> {
    if obj.is_null() {
        Ok(None)
    } else {
        string(obj, arg).map(Some)
    }
}

/// A raw vector's bytes.
pub fn raw(obj: &Robj, arg: &str) -> Result<Vec<u8>> {
    obj.as_raw_slice().map(<[u8]>::to_vec).ok_or_else(|| {
        Error::Other(format!(
            "argument `{arg}`: expected a raw vector, got {}",
            describe(obj)
        ))
    })
}

/// An error naming the argument, for checks the library does not make itself.
pub fn bad(arg: &str, why: impl std::fmt::Display) -> Error {
    Error::Other(format!("argument `{arg}`: {why}"))
}
