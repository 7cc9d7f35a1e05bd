//! GGML's judgement of a result against its reference (`test-backend-ops`' callback): NaN on
//! either side fails; infinities must match in position and sign; then the metric.

use crate::case::Metric;
use crate::host::{indices, Host};

/// The outcome of comparing one output.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The NMSE over the finite positions (0 when nothing differs).
    pub nmse: f64,
    /// The largest absolute difference, with its logical index and the two values.
    pub max: Option<MaxDiff>,
    /// Why the output fails, or `None` when it passes.
    pub failure: Option<String>,
}

/// Where two outputs differ most.
#[derive(Clone, Debug, PartialEq)]
pub struct MaxDiff {
    /// `|got − want|`.
    pub diff: f64,
    /// Logical index.
    pub at: [usize; crate::host::DIMS],
    /// The value computed.
    pub got: f64,
    /// The value expected.
    pub want: f64,
}

impl std::fmt::Display for MaxDiff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = &self.at;
        write!(
            f,
            "max |diff| {:.3e} at [{},{},{},{}]: got {}, expected {}",
            self.diff, at[0], at[1], at[2], at[3], self.got, self.want
        )?;
        if at[4] != 0 {
            write!(f, " (i4 = {})", at[4])?;
        }
        Ok(())
    }
}

/// Whether GGML counts `x` as infinite (±inf or beyond ±`f32::MAX`).
fn inf_like(x: f64) -> bool {
    x.abs() >= f32::MAX as f64
}

/// Compares `got` with `want` by `metric`. The NMSE is `Σ(got − want)² / Σ want²` (GGML divides
/// by the tested side's `Σ got²`; dividing by the reference keeps an all-zero wrong result from
/// giving 0/0 and passing); when the reference is all zeros it is the plain `Σ(got − want)²`.
pub fn compare(got: &Host, want: &Host, metric: Metric) -> Comparison {
    if metric == Metric::IndexSet && got.ne == want.ne {
        return compare(&sorted_rows(got), &sorted_rows(want), Metric::Exact);
    }
    let fail = |msg: String| Comparison {
        nmse: f64::NAN,
        max: None,
        failure: Some(msg),
    };
    if got.ne != want.ne {
        return fail(format!("shape {:?}, expected {:?}", got.ne, want.ne));
    }
    let (mut num, mut den) = (0f64, 0f64);
    let mut max: Option<MaxDiff> = None;
    for (i, (&g, &w)) in indices(got.ne).zip(got.v.iter().zip(&want.v)) {
        if g.is_nan() || w.is_nan() {
            return fail(format!(
                "NaN at [{},{},{},{}]: got {g}, expected {w}",
                i[0], i[1], i[2], i[3]
            ));
        }
        if inf_like(g) || inf_like(w) {
            if !(inf_like(g) && inf_like(w) && g.signum() == w.signum()) {
                return fail(format!(
                    "infinity mismatch at [{},{},{},{}]: got {g}, expected {w}",
                    i[0], i[1], i[2], i[3]
                ));
            }
            continue;
        }
        let d = (g - w).abs();
        if max.as_ref().is_none_or(|m| d > m.diff) {
            max = Some(MaxDiff {
                diff: d,
                at: i,
                got: g,
                want: w,
            });
        }
        num += d * d;
        den += w * w;
    }
    let nmse = if den > 0.0 { num / den } else { num };
    let failure = match metric {
        Metric::Exact if num != 0.0 => Some("values differ (exact match required)".to_string()),
        Metric::Nmse(t) if nmse > t => Some(format!("nmse={nmse:.3e} > {t:.0e}")),
        _ => None,
    };
    Comparison { nmse, max, failure }
}

/// `h` with the values of each row (along dimension 0) in ascending order.
fn sorted_rows(h: &Host) -> Host {
    h.map_rows(h.ne[0], |_, row| {
        let mut r = row.to_vec();
        r.sort_by(f64::total_cmp);
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: &[f64]) -> Host {
        Host {
            ne: [v.len(), 1, 1, 1, 1],
            v: v.to_vec(),
        }
    }

    #[test]
    fn nan_and_infinities() {
        let m = Metric::Nmse(1e-7);
        assert!(compare(&h(&[f64::NAN]), &h(&[1.0]), m)
            .failure
            .unwrap()
            .contains("NaN"));
        assert!(compare(&h(&[1.0]), &h(&[f64::NAN]), m)
            .failure
            .unwrap()
            .contains("NaN"));
        let inf = f64::INFINITY;
        assert!(compare(&h(&[inf, 1.0]), &h(&[inf, 1.0]), m)
            .failure
            .is_none());
        assert!(compare(&h(&[f32::MAX as f64]), &h(&[inf]), m)
            .failure
            .is_none());
        assert!(compare(&h(&[-inf]), &h(&[inf]), m).failure.is_some());
        assert!(compare(&h(&[1.0]), &h(&[inf]), m).failure.is_some());
    }

    #[test]
    fn index_sets_ignore_the_order_within_a_row() {
        let two = |v: &[f64]| Host {
            ne: [2, 2, 1, 1, 1],
            v: v.to_vec(),
        };
        let want = two(&[1.0, 2.0, 3.0, 4.0]);
        assert!(
            compare(&two(&[2.0, 1.0, 4.0, 3.0]), &want, Metric::IndexSet)
                .failure
                .is_none()
        );
        // The same values in other rows are a different result.
        assert!(
            compare(&two(&[3.0, 1.0, 4.0, 2.0]), &want, Metric::IndexSet)
                .failure
                .is_some()
        );
    }

    #[test]
    fn nmse_and_exact() {
        let c = compare(&h(&[1.0, 2.0]), &h(&[1.0, 2.1]), Metric::Nmse(1e-3));
        let want = 0.01 / (1.0 + 4.41);
        assert!((c.nmse - want).abs() < 1e-12, "{}", c.nmse);
        assert!(c.failure.unwrap().starts_with("nmse=1.848e-3 > 1e-3"));
        let m = c.max.unwrap();
        assert_eq!((m.at[0], m.got, m.want), (1, 2.0, 2.1));
        assert!(compare(&h(&[1.0, 2.0]), &h(&[1.0, 2.0]), Metric::Exact)
            .failure
            .is_none());
        assert!(
            compare(&h(&[1.0, 2.0]), &h(&[1.0, 2.0 + 1e-15]), Metric::Exact)
                .failure
                .is_some()
        );
        // An all-zero reference: the plain squared error.
        assert_eq!(
            compare(&h(&[0.5]), &h(&[0.0]), Metric::Nmse(1.0)).nmse,
            0.25
        );
        assert!(compare(&h(&[0.0]), &h(&[1.0, 2.0]), Metric::Exact)
            .failure
            .unwrap()
            .contains("shape"));
    }
}
