//! Custom ops: MAP_CUSTOM1/2/3 (and their `_inplace` forms) and CUSTOM (`custom_4d`,
//! `custom_inplace`), computed by a Rust closure on the CPU thread pool with GGML's task split.
//!
//! # The closure's view of the tensors
//!
//! GGML hands a custom function raw `ggml_tensor` pointers; here the closure gets safe views:
//!
//! * the result as `&mut` [`CustomDst`]: the closure call `ith` of `nth` **owns** a contiguous
//!   share of the result's rows, [`CustomDst::rows`] (GGML's usual split, `ceil(nrows/nth)`
//!   rows per task), and may read and write only those: element access ([`CustomDst::get`],
//!   [`CustomDst::set`], any float type or I32, converted through f32) and, for F32 results
//!   with packed, 4-byte-aligned rows that no operand shares, a `&mut [f32]` of one owned
//!   row at a time ([`CustomDst::row_mut`]; the in-place forms use element access). Since no two tasks own the same row, tasks never race.
//! * each operand as [`CustomSrc`]: index-checked reads of any element ([`CustomSrc::get`],
//!   [`CustomSrc::read_row`]) and, for F32 operands with packed aligned rows whose memory the
//!   result does not share, a borrowed `&[f32]` row ([`CustomSrc::row`]). An operand that *is*
//!   the result's memory (the in-place forms) may only be read on the rows the task owns, so a
//!   task never reads what another one is writing.
//!
//! Every access returns `Err` (naming the index) instead of touching memory outside the
//! tensor or outside the task's share. A result or operand layout where elements overlap in
//! other ways makes the node run as a single task (`ith = 0`, `nth = 1`), as every such node of
//! the CPU backend does.
//!
//! # Tasks and parameters
//!
//! `n_tasks` is GGML's: [`N_TASKS_MAX`] (−1) uses every thread of the backend, a positive
//! value at most that many; the closure runs once per task with `(ith, nth = tasks)`. GGML's
//! `op_params` for custom ops hold a function pointer, the task count and a user pointer; here
//! they hold **only `n_tasks`** ([`CustomParams`]) and the closure lives beside them in the
//! node, so a node received from outside (whose parameters would be a pointer from the wire)
//! is always refused by [`super::Op::validate`] and no function pointer from outside is ever
//! called.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use bytemuck::{Pod, Zeroable};

use crate::context::{Context, NewTensor};
use crate::cpu::kernels::{load, store};
use crate::error::{Error, Result};
use crate::ops::spec::{opt, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::{Tensor, MAX_DIMS, MAX_SRC};
use crate::types::Type;

/// `GGML_N_TASKS_MAX`: a custom op's `n_tasks` meaning "as many tasks as threads".
pub const N_TASKS_MAX: i32 = -1;

/// The parameters of the custom ops as this library stores them: the task count only (GGML
/// also stores a function and a user pointer here; the closure lives beside the parameters).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct CustomParams {
    /// [`N_TASKS_MAX`] or a positive task count.
    pub n_tasks: i32,
}

/// A custom op's closure as a node stores it: the result, the operands in slot order, the task
/// index and the task count.
pub(crate) type CustomFn =
    Arc<dyn Fn(&mut CustomDst<'_>, &[CustomSrc<'_>], usize, usize) + Send + Sync>;

/// The spec of the custom ops: their nodes come only from the builders, which attach the
/// closure; the rule refuses every node offered from outside.
pub(crate) struct Custom;

const ANY: [Slot; MAX_SRC] = [opt("arg"); MAX_SRC];

impl OpSpec for Custom {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &ANY;
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        Err(src.err(
            "custom ops compute a Rust closure attached by their builder; a node without one \
             (from outside) is refused",
        ))
    }
}

/// A tensor's memory and layout as a custom op sees it.
#[derive(Clone, Copy)]
struct Raw {
    data: *mut u8,
    ty: Type,
    ne: [i64; MAX_DIMS],
    nb: [usize; MAX_DIMS],
}

impl Raw {
    fn nrows(&self) -> usize {
        self.ne[1..].iter().product::<i64>() as usize
    }

    /// The address of element `i`, or `Err` when `i` is outside the shape or the type has no
    /// f32 conversion.
    fn elem(&self, what: &str, i: [usize; MAX_DIMS]) -> Result<*mut u8> {
        if (0..MAX_DIMS).any(|d| i[d] >= self.ne[d] as usize) {
            return Err(Error::invalid(format!(
                "{what}: index {i:?} is outside the shape {:?}",
                self.ne
            )));
        }
        if !matches!(self.ty, Type::F32 | Type::F16 | Type::BF16 | Type::I32) {
            return Err(Error::unsupported(format!(
                "{what}: elements of {} have no f32 conversion",
                self.ty
            )));
        }
        let off: usize = (0..MAX_DIMS).map(|d| i[d] * self.nb[d]).sum();
        Ok(self.data.wrapping_add(off))
    }

    /// The flat row (over dimensions 1 and up) of element `i`.
    fn row_of(&self, i: [usize; MAX_DIMS]) -> usize {
        (1..MAX_DIMS)
            .rev()
            .fold(0, |acc, d| acc * self.ne[d] as usize + i[d])
    }

    /// Row `r` (flat over dimensions 1..) as an index of its first element.
    fn row_index(&self, what: &str, r: usize) -> Result<[usize; MAX_DIMS]> {
        if r >= self.nrows() {
            return Err(Error::invalid(format!(
                "{what}: row {r}; the tensor has {} rows",
                self.nrows()
            )));
        }
        let mut idx = [0usize; MAX_DIMS];
        let mut rest = r;
        for (slot, &n) in idx.iter_mut().zip(&self.ne).skip(1) {
            *slot = rest % n as usize;
            rest /= n as usize;
        }
        Ok(idx)
    }

    /// The start of row `r` when it can be a `[f32]`: F32, packed and 4-byte aligned.
    fn f32_row(&self, what: &str, r: usize) -> Result<*mut u8> {
        let idx = self.row_index(what, r)?;
        let packed = self.ty == Type::F32 && (self.nb[0] == 4 || self.ne[0] <= 1);
        let p = self
            .data
            .wrapping_add((1..MAX_DIMS).map(|d| idx[d] * self.nb[d]).sum());
        if !packed || (p as usize) % std::mem::align_of::<f32>() != 0 {
            return Err(Error::unsupported(format!(
                "{what}: row {r} is not a packed, aligned F32 row (type {}, strides {:?}); use \
                 element access",
                self.ty, self.nb
            )));
        }
        Ok(p)
    }
}

/// The rows `ith` owns of `nrows` split over `nth` tasks.
fn share(nrows: usize, ith: usize, nth: usize) -> Range<usize> {
    let per = nrows.div_ceil(nth.max(1));
    let start = (ith * per).min(nrows);
    start..(start + per).min(nrows)
}

/// A custom op's result, as one task sees it: it reads and writes the rows it owns.
pub struct CustomDst<'a> {
    raw: Raw,
    rows: Range<usize>,
    /// Whether an operand shares the result's memory (no slices then).
    shared: bool,
    _life: PhantomData<&'a mut [u8]>,
}

impl CustomDst<'_> {
    /// Wraps the result for task `ith` of `nth`.
    ///
    /// # Safety
    /// `data`, `ty`, `ne`, `nb` must describe the node's result in reserved memory, whose rows
    /// are pairwise disjoint when `nth > 1`, and no other task may be given the same rows
    /// while this view lives; `shared` must be true when an operand overlaps the result.
    pub(crate) unsafe fn new(
        data: *mut u8,
        ty: Type,
        ne: [i64; MAX_DIMS],
        nb: [usize; MAX_DIMS],
        (ith, nth): (usize, usize),
        shared: bool,
    ) -> CustomDst<'static> {
        let raw = Raw { data, ty, ne, nb };
        CustomDst {
            rows: share(raw.nrows(), ith, nth),
            shared,
            raw,
            _life: PhantomData,
        }
    }

    /// The result's type.
    pub fn ty(&self) -> Type {
        self.raw.ty
    }

    /// The result's shape.
    pub fn ne(&self) -> [i64; MAX_DIMS] {
        self.raw.ne
    }

    /// The result's row count (the product of dimensions 1 and up).
    pub fn nrows(&self) -> usize {
        self.raw.nrows()
    }

    /// The rows this task owns (flat row indices over dimensions 1 and up).
    pub fn rows(&self) -> Range<usize> {
        self.rows.clone()
    }

    /// The address of element `i`, which must be on an owned row.
    fn owned(&self, i: [usize; MAX_DIMS]) -> Result<*mut u8> {
        let p = self.raw.elem("CustomDst", i)?;
        let r = self.raw.row_of(i);
        if !self.rows.contains(&r) {
            return Err(Error::invalid(format!(
                "CustomDst: element {i:?} is on row {r}; this task owns rows {:?}",
                self.rows
            )));
        }
        Ok(p)
    }

    /// Element `i` of the result as f32; `Err` off the owned rows or outside the shape.
    pub fn get(&self, i: [usize; MAX_DIMS]) -> Result<f32> {
        let p = self.owned(i)?;
        // SAFETY: `owned` checked the index against the shape and the type.
        Ok(unsafe { load(p, self.raw.ty) })
    }

    /// Writes element `i` of the result (rounded to its type; I32 truncates); `Err` off the
    /// owned rows or outside the shape.
    pub fn set(&mut self, i: [usize; MAX_DIMS], v: f32) -> Result<()> {
        let p = self.owned(i)?;
        // SAFETY: `owned` checked the index, the type and that the row is this task's.
        unsafe { store(p, self.raw.ty, v) };
        Ok(())
    }

    /// Owned row `r` of an F32 result with packed, aligned rows, as a slice; `Err` when an
    /// operand shares the result's memory (the in-place forms: use [`CustomDst::set`]).
    pub fn row_mut(&mut self, r: usize) -> Result<&mut [f32]> {
        if self.shared {
            return Err(Error::unsupported(format!(
                "CustomDst::row_mut: row {r}; an operand shares the result's memory, use set"
            )));
        }
        let p = self.raw.f32_row("CustomDst::row_mut", r)?;
        if !self.rows.contains(&r) {
            return Err(Error::invalid(format!(
                "CustomDst::row_mut: row {r}; this task owns rows {:?}",
                self.rows
            )));
        }
        // SAFETY: a packed, aligned F32 row of ne0 elements inside the result, owned by this
        // task alone and read through no operand; the `&mut self` borrow keeps it the only
        // slice of the result.
        Ok(unsafe { std::slice::from_raw_parts_mut(p as *mut f32, self.raw.ne[0] as usize) })
    }
}

/// An operand of a custom op, read-only.
#[derive(Clone, Copy)]
pub struct CustomSrc<'a> {
    raw: Raw,
    /// Whether the result shares this operand's memory (no slices then).
    shared: bool,
    /// For an operand that is the result's own elements, the rows the task may read.
    rows: Option<(usize, usize)>,
    _life: PhantomData<&'a [u8]>,
}

impl CustomSrc<'_> {
    /// Wraps an operand.
    ///
    /// # Safety
    /// The fields must describe an operand of the node in reserved memory. `shared` must be
    /// true when the result overlaps it; when it is the very same elements as the result and
    /// tasks run in parallel, `rows` must be the task's own rows.
    pub(crate) unsafe fn new(
        data: *mut u8,
        ty: Type,
        ne: [i64; MAX_DIMS],
        nb: [usize; MAX_DIMS],
        shared: bool,
        rows: Option<Range<usize>>,
    ) -> CustomSrc<'static> {
        CustomSrc {
            raw: Raw { data, ty, ne, nb },
            shared,
            rows: rows.map(|r| (r.start, r.end)),
            _life: PhantomData,
        }
    }

    /// The operand's type.
    pub fn ty(&self) -> Type {
        self.raw.ty
    }

    /// The operand's shape.
    pub fn ne(&self) -> [i64; MAX_DIMS] {
        self.raw.ne
    }

    /// The operand's row count.
    pub fn nrows(&self) -> usize {
        self.raw.nrows()
    }

    fn readable(&self, r: usize) -> Result<()> {
        match self.rows {
            Some((a, b)) if !(a..b).contains(&r) => Err(Error::invalid(format!(
                "CustomSrc: row {r} of an operand that is the result's memory; this task may \
                 read rows {a}..{b}"
            ))),
            _ => Ok(()),
        }
    }

    /// Element `i` as f32 (F32, F16, BF16 or I32 operands); `Err` outside the shape.
    pub fn get(&self, i: [usize; MAX_DIMS]) -> Result<f32> {
        let p = self.raw.elem("CustomSrc", i)?;
        self.readable(self.raw.row_of(i))?;
        // SAFETY: `elem` checked the index against the shape and the type.
        Ok(unsafe { load(p, self.raw.ty) })
    }

    /// Copies row `r` into `out` (`out.len()` must be `ne0`) as f32.
    pub fn read_row(&self, r: usize, out: &mut [f32]) -> Result<()> {
        if out.len() != self.raw.ne[0] as usize {
            return Err(Error::invalid(format!(
                "CustomSrc::read_row: out has {} values; a row has {}",
                out.len(),
                self.raw.ne[0]
            )));
        }
        let mut idx = self.raw.row_index("CustomSrc::read_row", r)?;
        self.readable(r)?;
        for (i0, v) in out.iter_mut().enumerate() {
            idx[0] = i0;
            let p = self.raw.elem("CustomSrc::read_row", idx)?;
            // SAFETY: `elem` checked the index and the type.
            *v = unsafe { load(p, self.raw.ty) };
        }
        Ok(())
    }

    /// Row `r` of an F32 operand with packed, aligned rows whose memory the result does not
    /// share, as a slice.
    pub fn row(&self, r: usize) -> Result<&[f32]> {
        if self.shared {
            return Err(Error::unsupported(format!(
                "CustomSrc::row: row {r} is memory the result writes; use read_row or get"
            )));
        }
        let p = self.raw.f32_row("CustomSrc::row", r)?;
        // SAFETY: a packed, aligned F32 row inside the operand, which nothing writes while
        // the node runs (the result does not overlap it).
        Ok(unsafe { std::slice::from_raw_parts(p as *const f32, self.raw.ne[0] as usize) })
    }
}

/// `Err` unless `n_tasks` is [`N_TASKS_MAX`] or positive.
fn check_tasks(op: Op, n_tasks: i32) -> Result<()> {
    if n_tasks == N_TASKS_MAX || n_tasks > 0 {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "{}: n_tasks = {n_tasks}; it must be positive or N_TASKS_MAX (-1)",
        op.name()
    )))
}

impl Context {
    /// Creates a custom node: a fresh `ty`/`ne` result, or with `inplace` a view of `srcs[0]`.
    fn custom_node(
        &self,
        op: Op,
        (ty, ne): (Type, &[i64]),
        srcs: &[&Tensor],
        f: CustomFn,
        n_tasks: i32,
        inplace: bool,
    ) -> Result<Tensor> {
        check_tasks(op, n_tasks)?;
        let params = crate::ops::write_params(&CustomParams { n_tasks });
        let n = NewTensor::op(ty, ne, op, srcs.iter().map(|&t| t.clone()).collect())
            .params(&params)
            .custom(f);
        match (inplace, srcs.first()) {
            (true, Some(a)) => self.new_tensor_impl(n.view_of(a, 0).strides(a.nb())),
            _ => self.new_tensor_impl(n),
        }
    }

    fn map_custom(
        &self,
        op: Op,
        srcs: &[&Tensor],
        f: CustomFn,
        n_tasks: i32,
        inplace: bool,
    ) -> Result<Tensor> {
        let a = srcs[0];
        self.custom_node(op, (a.ty(), &a.ne()), srcs, f, n_tasks, inplace)
    }

    /// `ggml_map_custom1`: a result of `a`'s type and shape computed by `f(dst, a, ith, nth)`
    /// on the CPU, once per task (see the [module docs](crate::ops::custom) for what the
    /// closure may access and how `n_tasks` splits the work). `n_tasks` is
    /// [`N_TASKS_MAX`] or positive.
    pub fn map_custom1<F>(&self, a: &Tensor, f: F, n_tasks: i32) -> Result<Tensor>
    where
        F: Fn(&mut CustomDst<'_>, &CustomSrc<'_>, usize, usize) + Send + Sync + 'static,
    {
        self.map_custom(
            Op::MapCustom1,
            &[a],
            Arc::new(move |d, s, i, n| f(d, &s[0], i, n)),
            n_tasks,
            false,
        )
    }

    /// `ggml_map_custom1_inplace`: as [`Context::map_custom1`], the result a view of `a`
    /// (a task reads `a` only on the rows it owns).
    pub fn map_custom1_inplace<F>(&self, a: &Tensor, f: F, n_tasks: i32) -> Result<Tensor>
    where
        F: Fn(&mut CustomDst<'_>, &CustomSrc<'_>, usize, usize) + Send + Sync + 'static,
    {
        self.map_custom(
            Op::MapCustom1,
            &[a],
            Arc::new(move |d, s, i, n| f(d, &s[0], i, n)),
            n_tasks,
            true,
        )
    }

    /// `ggml_map_custom2`: a result of `a`'s type and shape computed by
    /// `f(dst, a, b, ith, nth)`, as [`Context::map_custom1`].
    pub fn map_custom2<F>(&self, a: &Tensor, b: &Tensor, f: F, n_tasks: i32) -> Result<Tensor>
    where
        F: Fn(&mut CustomDst<'_>, &CustomSrc<'_>, &CustomSrc<'_>, usize, usize)
            + Send
            + Sync
            + 'static,
    {
        self.map_custom(
            Op::MapCustom2,
            &[a, b],
            Arc::new(move |d, s, i, n| f(d, &s[0], &s[1], i, n)),
            n_tasks,
            false,
        )
    }

    /// `ggml_map_custom2_inplace`: as [`Context::map_custom2`], the result a view of `a`.
    pub fn map_custom2_inplace<F>(
        &self,
        a: &Tensor,
        b: &Tensor,
        f: F,
        n_tasks: i32,
    ) -> Result<Tensor>
    where
        F: Fn(&mut CustomDst<'_>, &CustomSrc<'_>, &CustomSrc<'_>, usize, usize)
            + Send
            + Sync
            + 'static,
    {
        self.map_custom(
            Op::MapCustom2,
            &[a, b],
            Arc::new(move |d, s, i, n| f(d, &s[0], &s[1], i, n)),
            n_tasks,
            true,
        )
    }

    /// `ggml_map_custom3`: a result of `a`'s type and shape computed by
    /// `f(dst, a, b, c, ith, nth)`, as [`Context::map_custom1`].
    pub fn map_custom3<F>(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: &Tensor,
        f: F,
        n_tasks: i32,
    ) -> Result<Tensor>
    where
        F: Fn(&mut CustomDst<'_>, &CustomSrc<'_>, &CustomSrc<'_>, &CustomSrc<'_>, usize, usize)
            + Send
            + Sync
            + 'static,
    {
        self.map_custom(
            Op::MapCustom3,
            &[a, b, c],
            Arc::new(move |d, s, i, n| f(d, &s[0], &s[1], &s[2], i, n)),
            n_tasks,
            false,
        )
    }

    /// `ggml_map_custom3_inplace`: as [`Context::map_custom3`], the result a view of `a`.
    pub fn map_custom3_inplace<F>(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: &Tensor,
        f: F,
        n_tasks: i32,
    ) -> Result<Tensor>
    where
        F: Fn(&mut CustomDst<'_>, &CustomSrc<'_>, &CustomSrc<'_>, &CustomSrc<'_>, usize, usize)
            + Send
            + Sync
            + 'static,
    {
        self.map_custom(
            Op::MapCustom3,
            &[a, b, c],
            Arc::new(move |d, s, i, n| f(d, &s[0], &s[1], &s[2], i, n)),
            n_tasks,
            true,
        )
    }

    /// `ggml_custom_4d`: a new `ty` tensor `[ne0, ne1, ne2, ne3]` computed by
    /// `f(dst, args, ith, nth)` (the operands in order, at most 9), as
    /// [`Context::map_custom1`].
    #[allow(clippy::too_many_arguments)]
    pub fn custom_4d<F>(
        &self,
        ty: Type,
        ne0: i64,
        ne1: i64,
        ne2: i64,
        ne3: i64,
        args: &[&Tensor],
        f: F,
        n_tasks: i32,
    ) -> Result<Tensor>
    where
        F: Fn(&mut CustomDst<'_>, &[CustomSrc<'_>], usize, usize) + Send + Sync + 'static,
    {
        if args.len() >= MAX_SRC {
            return Err(Error::invalid(format!(
                "CUSTOM: {} args; custom_4d takes at most {}",
                args.len(),
                MAX_SRC - 1
            )));
        }
        let ne = [ne0, ne1, ne2, ne3];
        self.custom_node(Op::Custom, (ty, &ne), args, Arc::new(f), n_tasks, false)
    }

    /// `ggml_custom_inplace`: `f(dst, [a, args…], ith, nth)` with the result a view of `a`
    /// (at most 8 further args).
    pub fn custom_inplace<F>(
        &self,
        a: &Tensor,
        args: &[&Tensor],
        f: F,
        n_tasks: i32,
    ) -> Result<Tensor>
    where
        F: Fn(&mut CustomDst<'_>, &[CustomSrc<'_>], usize, usize) + Send + Sync + 'static,
    {
        if args.len() >= MAX_SRC - 1 {
            return Err(Error::invalid(format!(
                "CUSTOM: {} args; custom_inplace takes at most {}",
                args.len(),
                MAX_SRC - 2
            )));
        }
        let mut srcs = vec![a];
        srcs.extend_from_slice(args);
        self.custom_node(
            Op::Custom,
            (a.ty(), &a.ne()),
            &srcs,
            Arc::new(f),
            n_tasks,
            true,
        )
    }
}
