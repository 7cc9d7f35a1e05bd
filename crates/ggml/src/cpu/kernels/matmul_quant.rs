//! MUL_MAT with quantized weights, as GGML's CPU backend does it: the activations `b` are
//! quantized once per node to the weights' dot type (Q8_0, Q8_1, Q8_K) into the node's shared
//! work area (the threads split the rows of `b`, with the vectorised quantizers of
//! [`quantize_act`]), the threads meet at a barrier, then claim chunks of the product — a
//! block of weight rows × a block of [`JQ`] activation columns of one batch — from an atomic
//! counter until none is left, so a thread that starts late does not hold the others at the
//! node's end. Every output element is one dot kernel call's result for its row and column,
//! which does not depend on which thread computes it or how the columns are grouped (the
//! kernels give each column what they give it alone; a unit test holds them to that), so the
//! result does not depend on the thread count or the claiming order.
//!
//! With at most [`PRIVATE_ROWS`] rows of `b` (token generation), each thread quantizes them
//! all into its own scratch instead: a few hundred values cost less than the barrier. Below
//! [`BAND_MIN_COLS`] columns the rows of a chunk go four at a time to the kernel's tile dot
//! where it has one (the 32-value types and the k-quants on AVX2 and AVX-512: bit for bit
//! the row dot, so the chunk boundaries and the thread count still do not change any
//! output), the rest to its row dot; but a matrix-vector product (one column) takes the tile
//! dots only where the plan's [`Matvec`] says the graph's weights do not stay in the
//! last-level cache and, on AVX2, its weight rows are [`TILE_MIN_ROW_BYTES`] or longer.
//!
//! Where the process may use AMX tiles and `b` has columns enough
//! ([`amx_kernel`](crate::cpu::quant_dot::amx_kernel): by default the k-quants from 8 columns,
//! whose AMX kernel gives the band products' bits; with `GGML_CPU_FORCE=amx` also the
//! 32-value types from 5), the chunks of the node go to the AMX kernel instead (every chunk,
//! so each element is computed one way).
//!
//! Otherwise, with at least [`BAND_MIN_COLS`] columns and a kernel that has band products
//! ([`BandDot`]: the k-quants and the signed 32-value types on AVX-512 VNNI and AVX2), every
//! output of the node comes from those instead: a thread lays out its chunk's block of
//! columns once in its scratch (kept while its next chunks are of the same block) and takes
//! the chunk's rows [`BAND_ROWS`] at a time.

use super::matmul::{batch_count, batch_index, row_f32};
use super::{st, NodePtrs, Params, Planned};
use crate::cpu::quant_dot::{
    isa, prefetch_l2, quant_dot, quantize_act, BandDot, Isa, QuantDot, BAND_ROWS, TILE_ROWS,
};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::Type;

/// How far ahead of its tile a matrix-vector product asks for weights of short rows into L2:
/// one core's outstanding misses bound what it reads from DRAM, and the hardware prefetcher
/// restarts at every 4 KiB page, so fetching further ahead raises the rate (Gemma 3's output
/// projection Q8_0 [640 → 262144] from DRAM, GB/s: Zen 5, one thread, six alternations 20.9 →
/// 24.8 median, 4 and 12 KiB gave 23.0 and 22.7; Zen 4, two threads, three alternations 16.0–17.2
/// → 28.1–33.1, where 4 and 16 KiB gave 20.1–21.5 and 29.4–30.6, and Zen 5's two threads even
/// ±8%). Each thread fetches ahead in its own chunks.
const LINEAR_PREFETCH: usize = 8 << 10;

/// The bytes ahead at which the tile loop of a product of `cols` columns prefetches weight
/// rows of `wbytes` bytes, `stride` apart: [`LINEAR_PREFETCH`] for one column where the rows
/// lie back to back and a tile's rows are shorter than the distance (longer rows are four
/// streams of their own, which the kernels' prefetch and the hardware's follow), else 0
/// (none).
fn linear_prefetch(cols: usize, stride: usize, wbytes: usize) -> usize {
    let short = stride == wbytes && TILE_ROWS * wbytes <= LINEAR_PREFETCH;
    if cols == 1 && short {
        LINEAR_PREFETCH
    } else {
        0
    }
}

/// Activation columns per chunk (dotted with each weight row of the chunk in one kernel call).
const JQ: usize = 64;
#[cfg(target_arch = "x86_64")]
const _: () = assert!(JQ <= crate::cpu::quant_dot::amx::MAX_COLS);

/// Chunks the claiming aims at per thread, so the last ones are small next to a thread's share.
const CHUNKS_PER_THREAD: usize = 8;

/// Weight rows per chunk, at least and at most.
const ROWS_MIN: usize = 16;
const ROWS_MAX: usize = 128;

/// Rows of `b` up to which every thread quantizes all of them itself (no barrier).
const PRIVATE_ROWS: usize = 4;

/// Columns of `b` (per batch) from which the band products are used where there are some.
const BAND_MIN_COLS: usize = 8;
// the k-quants' AMX kernel replaces the band products exactly where they are taken
#[cfg(target_arch = "x86_64")]
const _: () = assert!(BAND_MIN_COLS == crate::cpu::quant_dot::amx::EXACT_MIN_COLS);

/// The band products the node uses: `qd`'s, when `b` has [`BAND_MIN_COLS`] columns or more.
fn band_for(qd: &QuantDot, b_cols: i64) -> Option<BandDot> {
    qd.band.filter(|_| b_cols as usize >= BAND_MIN_COLS)
}

/// Bytes of scratch (a multiple of 4) the band products take for rows of `k` values: a
/// tile of [`JQ`] columns (from the first multiple of [`TILE_ALIGN`] bytes) and a band's
/// unpacked rows.
fn band_scratch(band: Option<BandDot>, k: usize) -> usize {
    band.map_or(0, |bd| {
        TILE_ALIGN + (bd.tile_bytes)(k, JQ) + (bd.scratch_bytes)(k)
    })
    .next_multiple_of(4)
}

/// The alignment of the band products' activation tile: a cache line, so that none of its
/// 64-byte loads spans two (a thread's scratch is only 8-byte aligned).
const TILE_ALIGN: usize = 64;

/// How a quantized MUL_MAT computes every one of its outputs, chosen once by [`plan`] (and
/// carried to the kernel as its `PATH` parameter): the row dots, the tile dots (and the row
/// dots for the rows after the last whole tile), the band products, or the AMX tiles.
const ROWS: u8 = 0;
/// See [`ROWS`].
const TILES: u8 = 1;
/// See [`ROWS`].
const BAND: u8 = 2;
/// See [`ROWS`].
const AMX: u8 = 3;

/// The part of the last-level cache (one in `LLC_SHARE`) a graph's weights may take for its
/// matrix-vector products to take the row dots: the rest is the activations', the KV
/// cache's and other processes' room. Measured (session 10): on the Xeon (L3 480 MiB) the
/// rows win at 33–62 MB of weights (7–13% of it) and lose from DRAM; on the loaded AVX2
/// Zen 3 (L3 32 MiB, shared with other processes) the tiles tie at 9 MiB and win from
/// 13 MiB (40% of it) on: a half would take the rows there.
const LLC_SHARE: usize = 4;

/// Bytes per weight row from which a matrix-vector product takes the AVX2 tile dots where
/// the graph's [`Matvec`] says tiles: shorter rows lie back to back within a page or two, so
/// the rows of a tile are one stream the hardware prefetcher follows already, and the AVX2
/// tiles (four row dots' instructions, interleaved) only cost. Measured (session 10, idle
/// AVX2 Zen 3): Gemma 3 270M (rows of 440–1,680 bytes, 235 MiB of weights) generates 28.5 /
/// 44.2 tokens/s on 1 / 2 threads with the rows against 21.6 / 35.6 with the tiles;
/// 4096-value rows (2,304–4,352 bytes) from DRAM are up to 1.35× faster with the tiles.
///
/// The AVX-512 tiles take rows of any length: they unpack and multiply four rows' blocks in
/// 512-bit registers, fewer instructions than four row dots, and the four independent sums
/// do not wait on one another. Measured (session 12, AMD EPYC Zen 5, Gemma 3 270M tg128,
/// three interleaved rounds, nothing else running): AVX-512 tiles 62.4 / 55.9 / 63.5
/// tokens/s against the rows' 55.6 / 50.6 / 49.3 on 1 thread, 92.5 / 71.0 / 83.1 against
/// 76.0 / 68.8 / 68.0 on 2; its AVX2 tiles and rows were even (56.3 / 56.7 / 50.8 against
/// 55.4 / 49.7 / 48.9 on 1 thread, mixed on 2).
const TILE_MIN_ROW_BYTES: usize = 2048;

/// The weight row length from which a matrix-vector product on path `isa` takes the tile
/// dots where the graph's [`Matvec`] says tiles: [`TILE_MIN_ROW_BYTES`], but any on AVX-512.
fn tile_min_row_bytes(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 0,
        Isa::Avx2 | Isa::Scalar => TILE_MIN_ROW_BYTES,
    }
}

/// How matrix-vector products with quantized weights take their weight rows, chosen for a
/// whole graph when the CPU plan is made ([`Matvec::for_weights`]). The two give the same
/// bits. The tile dots read [`TILE_ROWS`] weight streams at once, prefetching the rows after
/// them, which is worth 1.15–1.6× when the weights come from DRAM; with the weights in cache
/// the row dots are 5–20% faster (AVX-512 Xeon, docs/performance.md). A node's own size does
/// not tell which holds (every matrix fits a large L3); the weights a run of the graph reads
/// do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Matvec {
    /// One weight row at a time.
    Rows,
    /// [`TILE_ROWS`] weight rows at a time, where the kernel has a tile dot.
    Tiles,
}

impl Matvec {
    /// The choice for a graph whose MUL_MAT and MUL_MAT_ID nodes read `weight_bytes` of
    /// distinct weights: what `GGML_CPU_MATVEC` names (read once), else [`Matvec::choose`]
    /// with this CPU's last-level cache.
    pub(crate) fn for_weights(weight_bytes: usize) -> Matvec {
        static FORCED: std::sync::OnceLock<Option<Matvec>> = std::sync::OnceLock::new();
        let forced =
            *FORCED.get_or_init(|| Matvec::named(std::env::var("GGML_CPU_MATVEC").ok().as_deref()));
        forced.unwrap_or_else(|| Matvec::choose(weight_bytes, crate::cpu::features::llc_bytes()))
    }

    /// The rows when `weight_bytes` fit in 1/[`LLC_SHARE`] of the last-level cache of
    /// `llc_bytes`, else the tiles; the tiles when the cache's size is unknown (the weights
    /// of a model most likely do not fit).
    pub(crate) fn choose(weight_bytes: usize, llc_bytes: Option<usize>) -> Matvec {
        match llc_bytes {
            Some(llc) if weight_bytes <= llc / LLC_SHARE => Matvec::Rows,
            _ => Matvec::Tiles,
        }
    }

    /// The choice a value of `GGML_CPU_MATVEC` names (`rows` or `tiles`), `None` for none.
    fn named(v: Option<&str>) -> Option<Matvec> {
        match v?.trim() {
            "rows" => Some(Matvec::Rows),
            "tiles" => Some(Matvec::Tiles),
            _ => None,
        }
    }
}

/// The plan of a quantized MUL_MAT with weights `a` computed as type `ty` (theirs, or their
/// repacked layout's) with `ty`'s kernel `qd`, for a graph whose matrix-vector products
/// take `matvec`: the path ([`path`]), scratch per thread for one row of `b` as f32 and the
/// path's own, and a shared area for every row of `b` quantized to the dot type of `qd`,
/// with one barrier (or, for at most [`PRIVATE_ROWS`] rows, room for them in each thread's
/// scratch, and no barrier).
pub(super) fn plan(
    ty: Type,
    a: &Tensor,
    b: &Tensor,
    qd: QuantDot,
    matvec: Matvec,
) -> Result<Planned> {
    let k = a.ne()[0];
    let qbytes = qd.act.row_size(k)?;
    let b_rows = b.ne()[1..].iter().product::<i64>() as usize;
    let path = path(ty, &qd, isa(), b.ne()[1] as usize, matvec, a.nb()[1]);
    let quantized = (b_rows * qbytes).next_multiple_of(4);
    let row = k as usize * 4 + path_scratch(path, ty, &qd, k as usize);
    let shared = b_rows > PRIVATE_ROWS;
    let kernel: super::KernelFn = match (shared, path) {
        (false, AMX) => mul_mat_quant::<false, AMX>,
        (false, BAND) => mul_mat_quant::<false, BAND>,
        (false, TILES) => mul_mat_quant::<false, TILES>,
        (false, _) => mul_mat_quant::<false, ROWS>,
        (true, AMX) => mul_mat_quant::<true, AMX>,
        (true, BAND) => mul_mat_quant::<true, BAND>,
        (true, TILES) => mul_mat_quant::<true, TILES>,
        (true, _) => mul_mat_quant::<true, ROWS>,
    };
    Ok(if shared {
        Planned::new(kernel, row).with_shared(quantized, 1)
    } else {
        Planned::new(kernel, row + quantized)
    })
}

/// The path of a quantized MUL_MAT for weights of type `ty` (kernel `qd`, of path `isa`)
/// against `cols` columns per batch: the AMX tiles where they are taken, else the band
/// products where there are some, else the tile dots where `qd` has them (for one column
/// only when `matvec` says [`Matvec::Tiles`] and the weight rows, `row_bytes` each, are at
/// least [`tile_min_row_bytes`]), else the row dots.
fn path(ty: Type, qd: &QuantDot, isa: Isa, cols: usize, matvec: Matvec, row_bytes: usize) -> u8 {
    let tiles_for_one = matvec == Matvec::Tiles && row_bytes >= tile_min_row_bytes(isa);
    if takes_amx(ty, cols) {
        AMX
    } else if band_for(qd, cols as i64).is_some() {
        BAND
    } else if qd.tile.is_some() && (cols > 1 || tiles_for_one) {
        TILES
    } else {
        ROWS
    }
}

/// Scratch bytes (a multiple of 4) path `path` needs per thread for weights of type `ty`
/// (kernel `qd`) with rows of `k` values: the AMX kernel's, or the band products' (a tile
/// of [`JQ`] columns and a band's unpacked rows), or none.
fn path_scratch(path: u8, ty: Type, qd: &QuantDot, k: usize) -> usize {
    match path {
        #[cfg(target_arch = "x86_64")]
        AMX => crate::cpu::quant_dot::amx::kernel(ty).map_or(0, |kernel| {
            crate::cpu::quant_dot::amx::scratch_bytes(kernel, k).next_multiple_of(4)
        }),
        BAND => band_scratch(qd.band, k),
        _ => 0,
    }
}

/// Whether MUL_MAT takes the AMX tiles for weights of type `ty` against `cols` columns per
/// batch.
fn takes_amx(ty: Type, cols: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    return crate::cpu::quant_dot::amx_kernel(ty, cols).is_some();
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (ty, cols);
        false
    }
}

/// Weight rows per chunk for `m` rows, `blocks` (batch, column block) pairs and `nth` threads:
/// enough chunks for [`CHUNKS_PER_THREAD`] each, within [`ROWS_MIN`]..=[`ROWS_MAX`].
pub(super) fn rows_per_chunk(m: usize, blocks: usize, nth: usize) -> usize {
    let row_chunks = (CHUNKS_PER_THREAD * nth).div_ceil(blocks.max(1));
    m.div_ceil(row_chunks.max(1)).clamp(ROWS_MIN, ROWS_MAX)
}

/// The kernel ([`plan`] gave it its scratch and shared area): `b` quantized into the shared
/// area when `SHARED`, else by every thread into its scratch.
///
/// # Safety
/// As [`KernelFn`](super::KernelFn), with the plan [`plan`] made for the node.
unsafe fn mul_mat_quant<const SHARED: bool, const PATH: u8>(n: &NodePtrs, p: &Params) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    let simd = isa();
    let Some(qd) = quant_dot(a.ty, simd) else {
        unreachable!("planned for a type with a dot kernel")
    };
    let k = a.ne[0] as usize;
    let wbytes = k / a.ty.blck_size() * a.ty.type_size();
    let qbytes = k / qd.act.blck_size() * qd.act.type_size();
    let (m, nb1, batches) = (a.ne[1] as usize, b.ne[1] as usize, batch_count(b));
    let b_rows = nb1 * batches;
    let quantized = (b_rows * qbytes).next_multiple_of(4);
    let band = qd.band.filter(|_| PATH == BAND);
    let path_bytes = path_scratch(PATH, a.ty, &qd, k);
    let private_len = if SHARED { 0 } else { quantized / 4 };
    // SAFETY: the plan sized each thread's scratch for k f32 values, the path's scratch, and
    // the quantized rows too when not SHARED.
    let scratch = unsafe { p.scratch_f32(k + path_bytes / 4 + private_len) };
    let (fbuf, rest) = scratch.split_at_mut(k);
    let (path_buf, private) = rest.split_at_mut(path_bytes / 4);
    let path_buf: &mut [u8] = bytemuck::cast_slice_mut(path_buf);
    let (_amx_buf, band_buf) = path_buf.split_at_mut(if PATH == AMX { path_bytes } else { 0 });
    #[cfg(target_arch = "x86_64")]
    let mut amx = crate::cpu::quant_dot::amx::kernel(a.ty)
        .filter(|_| PATH == AMX)
        .map(|kern| crate::cpu::quant_dot::amx::Chunks::new(kern, _amx_buf, k));
    // the tile from a cache line's start (band_scratch counted the bytes skipped)
    let skip = band.map_or(0, |_| band_buf.as_ptr().align_offset(TILE_ALIGN));
    let band_buf = &mut band_buf[skip..];
    let (tile, band_rows) = band_buf.split_at_mut(band.map_or(0, |bd| (bd.tile_bytes)(k, JQ)));
    // the (batch, column block) whose columns `tile` holds
    let mut tiled = None;
    let qbase = if SHARED {
        p.shared_ptr(quantized)
    } else {
        private.as_mut_ptr() as *mut u8
    };
    let mine = if SHARED { p.range(b_rows) } else { 0..b_rows };

    // Phase 0: this thread's rows of b (all of them when not SHARED), quantized. Every read
    // of b ends before any write of the result (and, shared, before the barrier), so a result
    // placed over b cannot change what is read.
    {
        for r in mine {
            let (j, batch) = (r % nb1, r / nb1);
            let (_, bi) = batch_index(a, b, batch);
            // SAFETY: j < b.ne[1] and bi within b's batch dimensions; fbuf holds ne10 values;
            // nothing writes b during this phase.
            let row = unsafe { row_f32(b, b.row([j, bi[0], bi[1], bi[2]]), fbuf, true) };
            // SAFETY: row r's bytes of the area (sized for b_rows rows), which only this
            // thread touches before the barrier.
            let q = unsafe { std::slice::from_raw_parts_mut(qbase.add(r * qbytes), qbytes) };
            quantize_act(qd.act, simd, row, q);
        }
    }
    if SHARED {
        p.sync();
    }

    // Phase 1: chunks of (batch, column block, row block), rows fastest.
    // SAFETY: every row is written (by this thread, or before the barrier above); only read
    // from here on.
    let all = unsafe { std::slice::from_raw_parts(qbase as *const u8, b_rows * qbytes) };
    let packed = d.nb[0] == 4;
    let col_blocks = nb1.div_ceil(JQ);
    let rows = rows_per_chunk(m, col_blocks * batches, p.nth);
    let row_blocks = m.div_ceil(rows);
    let mut out = [[0f32; JQ]; BAND_ROWS];
    // The chunk's result rows (its columns of b), found once per chunk.
    let mut dst_rows = [std::ptr::null_mut::<u8>(); JQ];
    // SAFETY (of every write below): dst_rows[t] is a row of the F32 result and i < ne[0];
    // only the thread that claimed the chunk writes these elements.
    let put = |row: *mut u8, i: usize, v: f32| unsafe {
        if packed {
            st(row, i, v)
        } else {
            d.set(row, i, v)
        }
    };
    // Element i of every result row (one value per column of the chunk).
    let write = |dst_rows: &[*mut u8; JQ], i: usize, vals: &[f32]| {
        for (&row, &v) in dst_rows.iter().zip(vals) {
            put(row, i, v);
        }
    };
    // Rows i.. of `vals` (one per weight row, nj columns each) into the result column by
    // column: a column's values are adjacent in its result row, and the result rows lie a
    // whole row of the result apart (often a multiple of 4 KiB: the same L1 set), so writing
    // them weight row by weight row would touch every column's line once per value.
    let write_rows = |dst_rows: &[*mut u8; JQ], i: usize, vals: &[[f32; JQ]], nj: usize| {
        for (j, &row) in dst_rows.iter().enumerate().take(nj) {
            for (t, v) in vals.iter().enumerate() {
                put(row, i + t, v[j]);
            }
        }
    };
    for c in p.chunks(row_blocks * col_blocks * batches) {
        let (rb, rest) = (c % row_blocks, c / row_blocks);
        let (cb, batch) = (rest % col_blocks, rest / col_blocks);
        let (ai, bi) = batch_index(a, b, batch);
        let j0 = cb * JQ;
        let nj = JQ.min(nb1 - j0);
        let r0 = (batch * nb1 + j0) * qbytes;
        let block = &all[r0..r0 + nj * qbytes];
        for (t, row) in dst_rows.iter_mut().enumerate().take(nj) {
            *row = d.row([j0 + t, bi[0], bi[1], bi[2]]);
        }
        // SAFETY: i < a.ne[1], ai within a's batch dimensions; a row of a quantized tensor is
        // wbytes of packed blocks, not written by this node.
        let weights = |i: usize| unsafe {
            std::slice::from_raw_parts(a.row([i, ai[0], ai[1], ai[2]]), wbytes)
        };
        let (mut i, end) = (rb * rows, m.min((rb + 1) * rows));
        #[cfg(target_arch = "x86_64")]
        if let Some(amx) = amx.as_mut() {
            // SAFETY: the plan took the AMX path (`amx_kernel` found AMX granted on the
            // AVX-512 path); rows i..end of a are a.nb[1] bytes apart, each wbytes of blocks;
            // `block` holds nj <= JQ rows; `rest` names this column block of this batch.
            unsafe {
                amx.run(
                    weights(i).as_ptr(),
                    a.nb[1],
                    end - i,
                    block,
                    nj,
                    rest,
                    &mut |t, vals| write(&dst_rows, i + t, vals),
                )
            };
            continue;
        }
        if let Some(bd) = band {
            if tiled != Some((batch, cb)) {
                (bd.pack)(block, nj, tile);
                tiled = Some((batch, cb));
            }
            while i < end {
                // a short last band repeats its last row (computed, not written)
                let n = BAND_ROWS.min(end - i);
                let ws = std::array::from_fn(|t| weights(i + t.min(n - 1)));
                let mut outs = out.each_mut().map(|o| &mut o[..nj]);
                // SAFETY: `isa()` chose a path this CPU runs; `tile` holds the chunk's nj
                // columns laid out for rows of k values, `band_rows` the band's scratch.
                unsafe { (bd.dots)(ws, tile, band_rows, &mut outs) };
                write_rows(&dst_rows, i, &out[..n], nj);
                i += n;
            }
            continue;
        }
        if let Some(tile) = qd.tile.filter(|_| PATH == TILES) {
            let ahead = linear_prefetch(nj, a.nb[1], wbytes);
            // the end of this matrix's weights (a thread's next chunk mostly follows this one)
            let stop = if ahead > 0 {
                weights(m - 1).as_ptr_range().end as usize
            } else {
                0
            };
            // TILE_ROWS weight rows at a time (bit for bit what the row dot gives each)
            while i + TILE_ROWS <= end {
                if ahead > 0 {
                    let at = weights(i).as_ptr().wrapping_add(ahead);
                    let len = (TILE_ROWS * wbytes).min(stop.saturating_sub(at as usize));
                    prefetch_l2(at, len);
                }
                let [o0, o1, o2, o3, ..] = &mut out;
                let mut outs = [&mut o0[..nj], &mut o1[..nj], &mut o2[..nj], &mut o3[..nj]];
                let ws = std::array::from_fn(|t| weights(i + t));
                // SAFETY: `isa()` chose a path this CPU runs; `block` holds nj rows of k
                // values; the weight rows have wbytes each.
                unsafe { tile(ws, block, &mut outs) };
                write_rows(&dst_rows, i, &out[..TILE_ROWS], nj);
                i += TILE_ROWS;
            }
        }
        for i in i..end {
            // SAFETY: `isa()` chose a path this CPU runs; `block` holds nj rows of k values.
            unsafe { (qd.dot)(weights(i), block, &mut out[0][..nj]) };
            write(&dst_rows, i, &out[0][..nj]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunk sizes stay within bounds and give every thread several chunks where there are
    /// rows enough.
    #[test]
    fn chunks_are_bounded_and_plenty() {
        assert_eq!(rows_per_chunk(262_144, 1, 2), ROWS_MAX);
        assert_eq!(rows_per_chunk(640, 1, 2), 40);
        assert_eq!(rows_per_chunk(640, 4, 2), 160usize.min(ROWS_MAX));
        assert_eq!(rows_per_chunk(8, 1, 4), ROWS_MIN);
        assert_eq!(rows_per_chunk(1000, 0, 1), 125);
    }

    /// The rows while the weights fit in a quarter of the last-level cache, else (or when
    /// its size is unknown) the tiles; `GGML_CPU_MATVEC`'s names.
    #[test]
    fn matvec_takes_rows_while_the_weights_fit_a_quarter_of_the_llc() {
        const MIB: usize = 1 << 20;
        assert_eq!(Matvec::choose(0, Some(32 * MIB)), Matvec::Rows);
        assert_eq!(Matvec::choose(8 * MIB, Some(32 * MIB)), Matvec::Rows);
        assert_eq!(Matvec::choose(8 * MIB + 1, Some(32 * MIB)), Matvec::Tiles);
        assert_eq!(Matvec::choose(13 * MIB, Some(32 * MIB)), Matvec::Tiles);
        assert_eq!(Matvec::choose(62_000_000, Some(480 * MIB)), Matvec::Rows);
        assert_eq!(Matvec::choose(4 << 30, Some(480 * MIB)), Matvec::Tiles);
        assert_eq!(Matvec::choose(0, None), Matvec::Tiles);
        assert_eq!(Matvec::named(Some("rows")), Some(Matvec::Rows));
        assert_eq!(Matvec::named(Some(" tiles\n")), Some(Matvec::Tiles));
        assert_eq!(Matvec::named(Some("Rows")), None);
        assert_eq!(Matvec::named(Some("")), None);
        assert_eq!(Matvec::named(None), None);
    }

    /// The choice reaches only matrix-vector products of kernels with tile dots and, on AVX2,
    /// rows of [`TILE_MIN_ROW_BYTES`] or more: more columns keep the tiles, a kernel without
    /// them the rows, and so do shorter rows on AVX2 (not on AVX-512).
    #[test]
    fn matvec_decides_the_path_of_one_column_only() {
        const LONG: usize = TILE_MIN_ROW_BYTES;
        const SHORT: usize = TILE_MIN_ROW_BYTES - 1;
        for ty in [Type::Q4_0, Type::Q4_1, Type::Q8_0, Type::Q4_K, Type::Q6_K] {
            let scalar = quant_dot(ty, Isa::Scalar).unwrap();
            for matvec in [Matvec::Rows, Matvec::Tiles] {
                assert_eq!(
                    path(ty, &scalar, Isa::Scalar, 1, matvec, LONG),
                    ROWS,
                    "{ty}"
                );
            }
            #[cfg(target_arch = "x86_64")]
            for isa in [Isa::Avx2, Isa::Avx512] {
                let qd = quant_dot(ty, isa).unwrap();
                let short_tiles = if isa == Isa::Avx512 { TILES } else { ROWS };
                let p = |cols, matvec, bytes| path(ty, &qd, isa, cols, matvec, bytes);
                assert_eq!(p(1, Matvec::Rows, LONG), ROWS, "{ty} {isa:?}");
                assert_eq!(p(1, Matvec::Tiles, LONG), TILES, "{ty} {isa:?}");
                assert_eq!(p(1, Matvec::Tiles, SHORT), short_tiles, "{ty} {isa:?}");
                assert_eq!(p(1, Matvec::Rows, SHORT), ROWS, "{ty} {isa:?}");
                assert_eq!(p(2, Matvec::Rows, LONG), TILES, "{ty} {isa:?}");
                assert_eq!(p(2, Matvec::Rows, SHORT), TILES, "{ty} {isa:?}");
            }
        }
    }
}
