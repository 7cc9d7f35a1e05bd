//! The grid searches shared by the IQ2/IQ3/IQ1 quantizers: the grid index maps and neighbour
//! lists that `ggml_quantize_init` builds (`iq2xs_init_impl`, `iq3xs_init_impl`), and the scale
//! search over grid points of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S.
//!
//! Every floating-point expression evaluates the same operations in the same order as GGML's C
//! code, in `f32`, so the quantized bytes come out identical.

use std::sync::OnceLock;

use super::common::{nearest_int, PackedF16};
use super::iq_common::{fmax, fmax_slice, fold_signs, fold_signs_even};

/// A grid of `D`-dimensional points (GGML's `the_grid`, whose coordinates are the positions
/// `2l+1` of levels `l`), with the map from every packed level vector to its grid index or its
/// neighbour list.
pub(crate) struct GridTable<const D: usize> {
    /// Bits per level in a packed level vector.
    bits: u32,
    /// The levels `l` of each grid point.
    levels: Vec<[i8; D]>,
    /// The values `2l+1` of the levels the grid points use (GGML's grid positions).
    positions: Vec<f32>,
    /// For each packed level vector: the grid index (≥ 0), or `-(offset+1)` of its neighbour
    /// list in `neighbours`.
    map: Vec<i32>,
    /// Neighbour lists: a count, then grid indices sorted by (distance, index).
    neighbours: Vec<u16>,
}

/// Where a packed level vector lies: on the grid, or off it with a list of nearest grid points.
pub(crate) enum Lookup<'a> {
    /// The vector is the grid point with this index.
    OnGrid(usize),
    /// The vector is not on the grid; these grid points are its nearest.
    Off(&'a [u16]),
}

impl<const D: usize> GridTable<D> {
    /// Builds the table as `ggml_quantize_init` does: `packed` lists the grid points with `bits`
    /// bits per coordinate, `map_size` packed vectors are indexed, and each off-grid vector gets
    /// the grid points at its `nwant` smallest distinct squared distances, ordered by distance
    /// then index.
    pub(crate) fn new(packed: &[u16], bits: u32, map_size: usize, nwant: usize) -> Self {
        let mask = (1u32 << bits) - 1;
        let positions = |v: u32| -> [i8; D] {
            let mut p = [0i8; D];
            for (i, c) in p.iter_mut().enumerate() {
                *c = (2 * ((v >> (bits * i as u32)) & mask) + 1) as i8;
            }
            p
        };
        let points: Vec<[i8; D]> = packed.iter().map(|&v| positions(v as u32)).collect();
        let mut map = vec![-1i32; map_size];
        for (k, &v) in packed.iter().enumerate() {
            map[v as usize] = k as i32;
        }
        let mut neighbours = Vec::new();
        let mut dist = vec![0u32; points.len()];
        let mut radii: Vec<u32> = Vec::with_capacity(nwant);
        for (i, slot) in map.iter_mut().enumerate() {
            if *slot >= 0 {
                continue;
            }
            let pos = positions(i as u32);
            for (d, p) in dist.iter_mut().zip(&points) {
                *d = p
                    .iter()
                    .zip(&pos)
                    .map(|(&a, &b)| ((a - b) as i32 * (a - b) as i32) as u32)
                    .sum();
            }
            // The `nwant` smallest distinct distances, ascending.
            radii.clear();
            for _ in 0..nwant {
                let floor = radii.last().copied();
                let next = dist
                    .iter()
                    .copied()
                    .filter(|&d| floor.is_none_or(|f| d > f))
                    .min();
                match next {
                    Some(d) => radii.push(d),
                    None => break,
                }
            }
            *slot = -(neighbours.len() as i32 + 1);
            let start = neighbours.len();
            neighbours.push(0);
            for &radius in &radii {
                neighbours.extend(
                    dist.iter()
                        .enumerate()
                        .filter(|&(_, &d)| d == radius)
                        .map(|(j, _)| j as u16),
                );
            }
            neighbours[start] = (neighbours.len() - start - 1) as u16;
        }
        let levels: Vec<[i8; D]> = points.iter().map(|p| p.map(|c| (c - 1) / 2)).collect();
        let n_levels = levels
            .iter()
            .flatten()
            .map(|&l| l as usize + 1)
            .max()
            .unwrap_or(0);
        let positions = (0..n_levels.min(8)).map(|l| (2 * l + 1) as f32).collect();
        GridTable {
            bits,
            levels,
            positions,
            map,
            neighbours,
        }
    }

    /// The grid point's levels `l` (its positions are `2l+1`).
    #[inline]
    pub(crate) fn levels(&self, index: usize) -> [i8; D] {
        self.levels[index]
    }

    /// Packs a level vector into the map index.
    pub(crate) fn pack(&self, levels: &[i8]) -> usize {
        levels.iter().enumerate().fold(0usize, |u, (i, &l)| {
            u | ((l as usize) << (self.bits as usize * i))
        })
    }

    /// Looks a level vector up.
    pub(crate) fn lookup(&self, levels: &[i8]) -> Lookup<'_> {
        let slot = self.map[self.pack(levels)];
        if slot >= 0 {
            Lookup::OnGrid(slot as usize)
        } else {
            let at = (-(slot + 1)) as usize;
            let n = self.neighbours[at] as usize;
            Lookup::Off(&self.neighbours[at + 1..at + 1 + n])
        }
    }

    /// GGML's `iq2_find_best_neighbour`, `iq3_find_best_neighbour` and
    /// `iq1_find_best_neighbour2`: the neighbour minimising Σ w·(scale·q − x)² over the group,
    /// where level `l` stands for `q = values[l]`; writes its levels into `l` and returns its
    /// index. The first neighbour is taken when no distance compares below `f32::MAX`
    /// (non-finite input, where GGML aborts).
    ///
    /// Each value has one possible term `w·(scale·q − x)²` per level, so the terms are computed
    /// once (with GGML's operations) and each neighbour's distance sums its `D` terms in order.
    pub(crate) fn best_neighbour(
        &self,
        neighbours: &[u16],
        xval: &[f32],
        weight: &[f32],
        scale: f32,
        values: &[f32],
        l: &mut [i8],
    ) -> usize {
        let mut terms = [[0f32; 8]; D];
        for ((t, &x), &w) in terms.iter_mut().zip(xval).zip(weight) {
            for (t, &q) in t.iter_mut().zip(values) {
                let diff = scale * q - x;
                *t = w * diff * diff;
            }
        }
        let mut best_d2 = f32::MAX;
        let mut best = neighbours[0] as usize;
        for &n in neighbours {
            let levels = &self.levels[n as usize];
            let d2 = terms
                .iter()
                .zip(levels)
                .fold(0.0f32, |d2, (t, &level)| d2 + t[level as usize]);
            if d2 < best_d2 {
                best_d2 = d2;
                best = n as usize;
            }
        }
        l[..D].copy_from_slice(&self.levels(best));
        best
    }

    /// The grid index of a level vector, which the quantizers only produce on the grid; an
    /// off-grid vector (GGML aborts there) resolves to its first neighbour.
    pub(crate) fn index_of(&self, levels: &[i8]) -> usize {
        match self.lookup(levels) {
            Lookup::OnGrid(k) => k,
            Lookup::Off(n) => n[0] as usize,
        }
    }
}

/// A [`GridTable`] built on first use (GGML builds its tables in `ggml_quantize_init`), from
/// the arguments of [`GridTable::new`].
pub(crate) struct LazyGrid<const D: usize> {
    table: OnceLock<GridTable<D>>,
    packed: &'static [u16],
    bits: u32,
    map_size: usize,
    nwant: usize,
}

impl<const D: usize> LazyGrid<D> {
    /// A table of the grid `packed` (see [`GridTable::new`]), not built yet.
    pub(crate) const fn new(
        packed: &'static [u16],
        bits: u32,
        map_size: usize,
        nwant: usize,
    ) -> Self {
        LazyGrid {
            table: OnceLock::new(),
            packed,
            bits,
            map_size,
            nwant,
        }
    }

    /// The table, built by the first caller.
    pub(crate) fn get(&self) -> &GridTable<D> {
        self.table
            .get_or_init(|| GridTable::new(self.packed, self.bits, self.map_size, self.nwant))
    }
}

/// How the scale search revisits its best candidate at the final scale (GGML's variants).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refine {
    /// Requantize only the groups that were off the grid, if any (IQ2_XS, IQ2_S, IQ3_XXS).
    OffGridGroups,
    /// Requantize every group when any was off the grid or no candidate won (IQ3_S).
    AllGroupsIfAnyOffGrid,
    /// Requantize every group (IQ2_XXS).
    AllGroups,
}

/// How a grid i-quant stores the signs of each 8 values.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SignBits {
    /// Seven bits; the eighth is implied by even parity (IQ2_XXS, IQ2_XS, IQ3_XXS).
    EvenParity,
    /// All eight bits (IQ2_S, IQ3_S).
    All,
}

/// A group of values quantized onto the grid by [`ScaleSearch::quantize_group`].
pub(crate) struct GridGroup {
    /// The group's scale (positive).
    pub(crate) scale: f32,
    /// The grid index of each run of `D` values.
    pub(crate) index: [u16; 8],
    /// One sign byte per 8 values (bit `i` set where value `i` is negative), 7 bits with
    /// [`SignBits::EvenParity`].
    pub(crate) signs: [u8; 4],
}

/// The scale search of the IQ2/IQ3 quantizers over one block of values: for a range of trial
/// scales `1/id` with `id = (2·kmax−1 + is·step)/denom`, round the magnitudes to levels, move
/// each group of `D` levels onto the grid (its best neighbour when off it), and keep the levels
/// with the best weighted least-squares scale; then requantize at that scale and refit.
pub(crate) struct ScaleSearch<'a, const D: usize> {
    /// The grid the groups must lie on.
    pub(crate) table: &'a GridTable<D>,
    /// Number of levels (`kMaxQ`): levels run 0..kmax.
    pub(crate) kmax: i32,
    /// Trial offsets `is` run over `-steps..=steps`.
    pub(crate) steps: i32,
    /// Offset per trial step.
    pub(crate) step: f32,
    /// What is requantized after the trials.
    pub(crate) refine: Refine,
}

impl<const D: usize> ScaleSearch<'_, D> {
    /// Rounds the magnitudes of one group to levels at inverse scale `id`.
    fn round_group(&self, id: f32, xval: &[f32], l: &mut [i8]) {
        for (q, &v) in l.iter_mut().zip(xval) {
            *q = nearest_int(0.5 * (id * v - 1.0)).clamp(0, self.kmax - 1) as i8;
        }
    }

    /// Σ w·x·q and Σ w·q² with q = 2l+1.
    fn sums(xval: &[f32], weight: &[f32], l: &[i8]) -> (f32, f32) {
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for ((&x, &w), &li) in xval.iter().zip(weight).zip(l) {
            let q = (2 * li as i32 + 1) as f32;
            sumqx += w * x * q;
            sumq2 += w * q * q;
        }
        (sumqx, sumq2)
    }

    /// Moves group `k` of `l` onto the grid at `scale`; returns whether it already was.
    fn snap_group(&self, k: usize, xval: &[f32], waux: &[f32], scale: f32, l: &mut [i8]) -> bool {
        let g = D * k..D * k + D;
        match self.table.lookup(&l[g.clone()]) {
            Lookup::OnGrid(_) => true,
            Lookup::Off(neighbours) => {
                let (xg, wg) = (&xval[g.clone()], &waux[g.clone()]);
                let table = self.table;
                table.best_neighbour(neighbours, xg, wg, scale, &table.positions, &mut l[g]);
                false
            }
        }
    }

    /// Quantizes a group of `N` values `xb` (16 or 32) with importance `weight`, as the IQ2/IQ3
    /// quantizers do: folds the signs into the magnitudes (keeping even parity when the format
    /// stores 7 sign bits), leaves a group whose largest magnitude is below `eps` at zero
    /// (`None`), runs the search from the `(denom, scale)` that `start(magnitudes, max)` gives
    /// (`None` also leaves the group at zero), and flips the signs when the fitted scale came out
    /// negative.
    pub(crate) fn quantize_group<const N: usize>(
        &self,
        xb: &[f32],
        weight: &[f32; N],
        sign_bits: SignBits,
        eps: f32,
        start: impl FnOnce(&[f32; N], f32) -> Option<(f32, f32)>,
    ) -> Option<GridGroup> {
        let (mut xval, mut signs) = ([0f32; N], [0u8; 4]);
        let sign_mask = match sign_bits {
            SignBits::EvenParity => {
                fold_signs_even(xb, weight, &mut xval, &mut signs);
                127
            }
            SignBits::All => {
                fold_signs(xb, &mut xval, &mut signs);
                255
            }
        };
        let max = fmax_slice(&xval);
        if max < eps {
            return None;
        }
        let (denom, first_scale) = start(&xval, max)?;
        let waux = weight.map(f32::sqrt);
        let (mut l, mut index) = ([0i8; N], [0u16; 8]);
        let mut scale = self.run(&xval, weight, &waux, denom, first_scale, &mut l, &mut index);
        if scale < 0.0 {
            scale = -scale;
            signs.iter_mut().for_each(|s| *s = !*s & sign_mask);
        }
        Some(GridGroup {
            scale,
            index,
            signs,
        })
    }

    /// Runs the search over `xval` (magnitudes, a multiple of `D` values, at most 32) with
    /// weights `weight` (and `waux` = √weight for the neighbour choice). `denom` is the
    /// magnitude the trial scales are relative to and `scale` the fallback result. Writes the
    /// levels to `l`, the grid index of each group to `index`, and returns the scale (negative
    /// when the fit flipped sign; the caller then flips the signs).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &self,
        xval: &[f32],
        weight: &[f32],
        waux: &[f32],
        denom: f32,
        mut scale: f32,
        l: &mut [i8],
        index: &mut [u16],
    ) -> f32 {
        let n = xval.len();
        let groups = n / D;
        let mut laux = [0i8; 32];
        let mut on_grid = [self.refine != Refine::AllGroupsIfAnyOffGrid; 32];
        let mut on_grid_aux = [true; 32];
        l[..n].fill(0);
        let mut best = 0.0f32;
        let top = (2 * self.kmax - 1) as f32;
        for is in -self.steps..=self.steps {
            let id = (top + is as f32 * self.step) / denom;
            let this_scale = 1.0 / id;
            for (k, on) in on_grid_aux[..groups].iter_mut().enumerate() {
                let g = D * k..D * k + D;
                self.round_group(id, &xval[g.clone()], &mut laux[g]);
                *on = self.snap_group(k, xval, waux, this_scale, &mut laux);
            }
            let (sumqx, sumq2) = Self::sums(xval, weight, &laux[..n]);
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                scale = sumqx / sumq2;
                best = scale * sumqx;
                l[..n].copy_from_slice(&laux[..n]);
                on_grid[..groups].copy_from_slice(&on_grid_aux[..groups]);
            }
        }
        let refine = scale > 0.0
            && (self.refine == Refine::AllGroups || on_grid[..groups].iter().any(|&g| !g));
        if refine {
            let id = 1.0 / scale;
            for (k, &on) in on_grid[..groups].iter().enumerate() {
                if self.refine == Refine::OffGridGroups && on {
                    continue;
                }
                let g = D * k..D * k + D;
                self.round_group(id, &xval[g.clone()], &mut l[g]);
                self.snap_group(k, xval, waux, scale, l);
            }
            let (sumqx, sumq2) = Self::sums(xval, weight, &l[..n]);
            if sumq2 > 0.0 {
                scale = sumqx / sumq2;
            }
        }
        for (k, ix) in index[..groups].iter_mut().enumerate() {
            *ix = self.table.index_of(&l[D * k..D * k + D]) as u16;
        }
        scale
    }
}

/// Quantizes the groups of `N` values of a super-block with `group(ib, xb)` (which stores what
/// it quantized and returns the group's scale, or `None` for a group left at zero). Returns the
/// scales (0 for the groups left at zero) and the largest (GGML's `MAX` from 0).
pub(crate) fn quantize_groups<const N: usize, const G: usize>(
    xbl: &[f32],
    mut group: impl FnMut(usize, &[f32]) -> Option<f32>,
) -> ([f32; G], f32) {
    let mut scales = [0f32; G];
    let mut max_scale = 0f32;
    for (ib, xb) in xbl.chunks_exact(N).enumerate() {
        if let Some(scale) = group(ib, xb) {
            scales[ib] = scale;
            max_scale = fmax(max_scale, scale);
        }
    }
    (scales, max_scale)
}

/// The super-block scale of groups whose largest scale is `max_scale`: GGML codes each group
/// scale against `d = max_scale / divisor` and stores `d · factor`. Returns the stored scale and
/// `1/d`, or `None` when every group is zero (the block then stays all zero).
pub(crate) fn super_block_scale(
    max_scale: f32,
    divisor: f32,
    factor: f32,
) -> Option<(PackedF16, f32)> {
    if max_scale == 0.0 {
        return None;
    }
    let d = max_scale / divisor;
    Some((PackedF16::from_f32(d * factor), 1.0 / d))
}
