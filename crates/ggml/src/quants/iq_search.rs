//! The grid searches shared by the IQ2/IQ3/IQ1 quantizers: the grid index maps and neighbour
//! lists that `ggml_quantize_init` builds (`iq2xs_init_impl`, `iq3xs_init_impl`), and the scale
//! search over grid points of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S.
//!
//! Every floating-point expression evaluates the same operations in the same order as GGML's C
//! code, in `f32`, so the quantized bytes come out identical.

use super::common::nearest_int;

/// A grid of `D`-dimensional points (levels stored as positions `2l+1`, as GGML's `the_grid`),
/// with the map from every packed level vector to its grid index or its neighbour list.
pub(crate) struct GridTable<const D: usize> {
    /// Bits per level in a packed level vector.
    bits: u32,
    /// `2l+1` per coordinate of each grid point.
    points: Vec<[i8; D]>,
    /// The levels `l` of each grid point.
    levels: Vec<[i8; D]>,
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
        let levels = points.iter().map(|p| p.map(|c| (c - 1) / 2)).collect();
        GridTable {
            bits,
            points,
            levels,
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

    /// GGML's `iq2_find_best_neighbour` / `iq3_find_best_neighbour`: the neighbour minimising
    /// Σ w·(scale·q − x)² over the group; writes its levels into `l` and returns its index. The
    /// first neighbour is taken when no distance compares below `f32::MAX` (non-finite input,
    /// where GGML aborts).
    pub(crate) fn best_neighbour(
        &self,
        neighbours: &[u16],
        xval: &[f32],
        weight: &[f32],
        scale: f32,
        l: &mut [i8],
    ) -> usize {
        let mut best_d2 = f32::MAX;
        let mut best = neighbours[0] as usize;
        for &n in neighbours {
            let pg = &self.points[n as usize];
            let mut d2 = 0.0f32;
            for i in 0..D {
                let diff = scale * pg[i] as f32 - xval[i];
                d2 += weight[i] * diff * diff;
            }
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
                self.table
                    .best_neighbour(neighbours, xg, wg, scale, &mut l[g]);
                false
            }
        }
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
