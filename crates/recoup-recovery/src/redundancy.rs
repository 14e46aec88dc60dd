//! AutoRec's Redundancy Adapter (AutoRec §V-A, Eqs. (1)-(4)): the redundancy level K_theta from
//! the loss rate R, the loss detection time T_unit and the tolerances alpha, beta, gamma.
//!
//! F falls and G, H rise with K (AutoRec Appendices C, E, G; checked over a grid in the tests), so
//! each bound is a binary search over K in `[0, k_max]`, O(log k_max) per decision (§VIII-A).

/// Comparisons against a tolerance allow this relative slack, so that a value equal to the
/// tolerance on paper (e.g. G(3) = 3 x 0.1 = 0.3 <= beta = 0.3) is not lost to rounding.
const SLACK: f64 = 1e-12;

fn at_most(value: f64, bound: f64) -> bool {
    value <= bound + SLACK * bound.abs().max(1.0)
}

/// F(K), Eq. (1): mean recovery latency with K reinjections per loss, all in on-mode, in the unit
/// of `t_unit`.
#[must_use]
pub fn f(k: u32, r: f64, t_unit: f64) -> f64 {
    let k_f = f64::from(k);
    (1.0 + k_f * r.powi(k_i32(k))) / ((1.0 - r) * (1.0 + k_f)) * t_unit
}

/// G(K) = K R, Eq. (2): redundancy cost.
#[must_use]
pub fn g(k: u32, r: f64) -> f64 {
    f64::from(k) * r
}

/// H(K), Eq. (3): goodput reduction, all in on-mode.
#[must_use]
pub fn h(k: u32, r: f64) -> f64 {
    let k_f = f64::from(k);
    1.0 - 1.0 / (1.0 + k_f * r - (1.0 + k_f) * r * r + r.powi(k_i32(k).saturating_add(2)))
}

fn k_i32(k: u32) -> i32 {
    i32::try_from(k).unwrap_or(i32::MAX)
}

/// The smallest K in `[0, k_max]` with `pred(K)`, for a predicate false then true along K; `None`
/// if it never holds.
fn first_true(k_max: u32, pred: impl Fn(u32) -> bool) -> Option<u32> {
    let (mut lo, mut hi) = (0u32, k_max.saturating_add(1));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    (lo <= k_max).then_some(lo)
}

/// K_alpha, Step #1: the least K with F(K) <= alpha. When even `k_max` misses the target, AutoRec
/// still tries its best ("satisfy the recovery latency constraint whenever possible"): `k_max`.
#[must_use]
pub fn k_alpha(r: f64, t_unit: f64, alpha: f64, k_max: u32) -> u32 {
    first_true(k_max, |k| at_most(f(k, r, t_unit), alpha)).unwrap_or(k_max)
}

/// K_beta, Step #2: the largest K with G(K) <= beta (0 if none).
#[must_use]
pub fn k_beta(r: f64, beta: f64, k_max: u32) -> u32 {
    first_true(k_max, |k| !at_most(g(k, r), beta)).map_or(k_max, |k| k.saturating_sub(1))
}

/// K_gamma, Step #3: the largest K with H(K) <= gamma (0 if none).
#[must_use]
pub fn k_gamma(r: f64, gamma: f64, k_max: u32) -> u32 {
    first_true(k_max, |k| !at_most(h(k, r), gamma)).map_or(k_max, |k| k.saturating_sub(1))
}

/// The tolerances of AutoRec's Redundancy Adapter, in seconds and fractions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerances {
    /// alpha: recovery latency tolerance, seconds.
    pub alpha: f64,
    /// beta: redundancy cost tolerance (fraction of sent packets).
    pub beta: f64,
    /// gamma: goodput reduction tolerance (fraction).
    pub gamma: f64,
}

/// K_theta, Eq. (4): `min(K_alpha, K_beta, K_gamma)`, and 0 when nothing was lost. `t_unit` in
/// seconds. A loss rate of 1 (everything lost in the interval) is outside the paper's
/// `0 < R < 1`; it is clamped just below 1, where F is huge and G decides.
#[must_use]
pub fn k_theta(r: f64, t_unit: f64, tol: &Tolerances, k_max: u32) -> u32 {
    if r.is_nan() || r <= 0.0 {
        return 0;
    }
    let r = r.min(1.0 - 1e-9);
    k_alpha(r, t_unit, tol.alpha, k_max)
        .min(k_beta(r, tol.beta, k_max))
        .min(k_gamma(r, tol.gamma, k_max))
}

/// T_thres = T_unit / (K_theta + 1), Eq. (5): how long an entry may stay silent before an
/// opportunistic reinjection.
#[must_use]
pub fn t_thres(t_unit: std::time::Duration, k_theta: u32) -> std::time::Duration {
    t_unit / k_theta.saturating_add(1)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn formulas_match_hand_computed_values() {
        // F(1) at R = 0.1: (1 + 0.1) / (0.9 * 2) = 0.611111...
        assert!(close(f(1, 0.1, 1.0), 1.1 / 1.8));
        // F(2) at R = 0.1: (1 + 2 * 0.01) / (0.9 * 3) = 1.02 / 2.7.
        assert!(close(f(2, 0.1, 1.0), 1.02 / 2.7));
        // F(0) is plain ARQ: T_unit / (1 - R).
        assert!(close(f(0, 0.1, 0.06), 0.06 / 0.9));
        // F(3) at R = 0.05: (1 + 3 * 0.000125) / (0.95 * 4) = 0.26325658...
        assert!(close(f(3, 0.05, 1.0), 0.263_256_578_947_368_4));
        assert!(close(g(3, 0.05), 0.15));
        assert!(close(g(5, 0.3), 1.5));
        // H(1) at R = 0.1: 1 - 1 / (1 + 0.1 - 0.02 + 0.001) = 1 - 1/1.081.
        assert!(close(h(1, 0.1), 1.0 - 1.0 / 1.081));
        // H(2) at R = 0.1: 1 - 1 / (1 + 0.2 - 0.03 + 0.0001) = 1 - 1/1.1701.
        assert!(close(h(2, 0.1), 1.0 - 1.0 / 1.1701));
        // H(0) = 0: no reinjection, no goodput reduction.
        assert!(close(h(0, 0.3), 0.0));
        assert!(close(h(5, 0.3), 0.489_852_841_420_194_6));
    }

    #[test]
    fn f_falls_and_g_h_rise_over_the_grid() {
        for i in 1..100 {
            let r = f64::from(i) / 100.0;
            for k in 0..10 {
                assert!(f(k + 1, r, 1.0) < f(k, r, 1.0), "F at R={r} K={k}");
                assert!(g(k + 1, r) > g(k, r), "G at R={r} K={k}");
                assert!(h(k + 1, r) >= h(k, r), "H at R={r} K={k}");
            }
        }
    }

    fn linear_alpha(r: f64, t: f64, alpha: f64, k_max: u32) -> u32 {
        (0..=k_max)
            .find(|&k| at_most(f(k, r, t), alpha))
            .unwrap_or(k_max)
    }

    fn linear_max(k_max: u32, ok: impl Fn(u32) -> bool) -> u32 {
        (0..=k_max).filter(|&k| ok(k)).max().unwrap_or(0)
    }

    #[test]
    fn binary_search_equals_linear_scan_everywhere() {
        let alphas = [0.0, 0.005, 0.02, 0.03, 0.05, 0.2, 1.0];
        let betas = [0.0, 0.05, 0.1, 0.3, 0.5, 1.0, 5.0];
        let gammas = [0.0, 0.05, 0.2, 0.5, 0.9];
        let t_units = [0.0, 0.03, 0.06, 0.3];
        for i in 1..100 {
            let r = f64::from(i) / 100.0;
            for k_max in [0, 1, 3, 10] {
                for &t in &t_units {
                    for &a in &alphas {
                        assert_eq!(k_alpha(r, t, a, k_max), linear_alpha(r, t, a, k_max));
                    }
                }
                for &b in &betas {
                    let lin = linear_max(k_max, |k| at_most(g(k, r), b));
                    assert_eq!(k_beta(r, b, k_max), lin, "R={r} beta={b}");
                }
                for &c in &gammas {
                    let lin = linear_max(k_max, |k| at_most(h(k, r), c));
                    assert_eq!(k_gamma(r, c, k_max), lin, "R={r} gamma={c}");
                }
            }
        }
    }

    #[test]
    fn k_theta_by_hand() {
        let testbed = Tolerances {
            alpha: 0.030,
            beta: 0.3,
            gamma: 0.2,
        };
        // R = 5 %, T_unit = 60 ms: F(1) = 33.2 ms > 30 ms, F(2) = 21.1 ms -> K_alpha = 2;
        // K_beta = 6 (6 x 0.05 = 0.3); H(5) = 0.190, H(6) = 0.220 -> K_gamma = 5. K_theta = 2.
        assert_eq!(k_alpha(0.05, 0.060, 0.030, 10), 2);
        assert_eq!(k_beta(0.05, 0.3, 10), 6);
        assert_eq!(k_gamma(0.05, 0.2, 10), 5);
        assert_eq!(k_theta(0.05, 0.060, &testbed, 10), 2);
        // R = 10 %: K_beta = 3 exactly at the tolerance, K_gamma = 2 (H(3) = 0.206 > 0.2).
        assert_eq!(k_beta(0.1, 0.3, 10), 3);
        assert_eq!(k_gamma(0.1, 0.2, 10), 2);
        assert_eq!(k_theta(0.1, 0.060, &testbed, 10), 2);
        // R = 2 %, T_unit = 100 ms: K_alpha = 3 (F(2) = 34.0 ms, F(3) = 25.5 ms).
        assert_eq!(k_theta(0.02, 0.100, &testbed, 10), 3);
        // Deployment tolerances at R = 30 %: K_beta = 1, but F(0) = 85.7 ms <= 200 ms -> 0.
        let deployment = Tolerances {
            alpha: 0.200,
            beta: 0.5,
            gamma: 0.5,
        };
        assert_eq!(k_theta(0.3, 0.060, &deployment, 10), 0);
        // Unreachable latency target: K_alpha = k_max, the others decide.
        assert_eq!(k_alpha(0.5, 10.0, 0.001, 10), 10);
    }

    #[test]
    fn no_loss_means_no_redundancy() {
        let tol = Tolerances {
            alpha: 0.0,
            beta: 10.0,
            gamma: 1.0,
        };
        assert_eq!(k_theta(0.0, 1.0, &tol, 10), 0);
        assert_eq!(k_theta(f64::NAN, 1.0, &tol, 10), 0);
        // Everything lost: clamped, G bounds it.
        assert_eq!(k_theta(1.0, 0.06, &tol, 10), 10);
    }

    #[test]
    fn t_thres_spreads_reinjections_over_t_unit() {
        assert_eq!(
            t_thres(Duration::from_millis(60), 2),
            Duration::from_millis(20)
        );
        assert_eq!(
            t_thres(Duration::from_millis(60), 0),
            Duration::from_millis(60)
        );
        assert_eq!(
            t_thres(Duration::from_millis(100), 3),
            Duration::from_millis(25)
        );
    }
}
