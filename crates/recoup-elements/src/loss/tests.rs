use super::*;
use crate::rng::element_rng;

fn spec(s: &str) -> LossSpec {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn pct(f: f64) -> Prob {
    Prob::from_fraction(f)
}

/// Loss sequence of `n` packets one per ms.
fn run(s: &str, seed: u64, n: u64) -> Vec<bool> {
    let mut loss = Loss::new(&spec(s), element_rng(seed, "loss")).expect("model");
    (0..n)
        .map(|i| loss.decide(Instant::from_nanos(i * 1_000_000), i))
        .collect()
}

fn rate_and_mean_burst(seq: &[bool]) -> (f64, f64) {
    let lost = seq.iter().filter(|&&l| l).count();
    let bursts = seq
        .iter()
        .enumerate()
        .filter(|&(i, &l)| l && (i == 0 || !seq[i - 1]))
        .count();
    (
        lost as f64 / seq.len() as f64,
        lost as f64 / bursts.max(1) as f64,
    )
}

fn assert_close(what: &str, got: f64, want: f64, rel_tol: f64, seed: u64) {
    assert!(
        (got - want).abs() <= rel_tol * want,
        "{what}: got {got:.5}, closed form {want:.5}, tolerance {:.0} % (seed {seed})",
        rel_tol * 100.0
    );
}

#[test]
fn gemodel_parses_netem_forms_and_defaults() {
    let LossSpec::GilbertElliott(g) = spec("gemodel 1%") else {
        panic!()
    };
    // tc: r = 1 - p, 1-h = 100 % (h = 0), 1-k = 0.
    assert_eq!(
        (g.p, g.r, g.h, g.k1),
        (pct(0.01), pct(0.99), Prob::ZERO, Prob::ZERO)
    );
    let LossSpec::GilbertElliott(g) = spec("gemodel 1% 10% 70% 0.1%") else {
        panic!()
    };
    assert_eq!(
        (g.p, g.r, g.h, g.k1),
        (pct(0.01), pct(0.1), pct(0.7).complement(), pct(0.001))
    );
    // netem's own prefix and bare numbers (percent).
    assert_eq!(
        spec("loss gemodel 1 10 70 0.1"),
        spec("gemodel 1% 10% 70% 0.1%")
    );
    let LossSpec::GilbertElliott(g) = spec("gemodel 5% 20%") else {
        panic!()
    };
    assert_eq!((g.h, g.k1), (Prob::ZERO, Prob::ZERO));
}

#[test]
fn state_parses_netem_forms_and_defaults() {
    let LossSpec::FourState(s) = spec("state 1%") else {
        panic!()
    };
    assert_eq!(
        (s.p13, s.p31, s.p32, s.p23, s.p14),
        (pct(0.01), pct(0.99), Prob::ZERO, Prob::ONE, Prob::ZERO)
    );
    let LossSpec::FourState(s) = spec("loss state 1% 50%") else {
        panic!()
    };
    assert_eq!((s.p31, s.p32, s.p23), (pct(0.5), Prob::ZERO, Prob::ONE));
    let LossSpec::FourState(s) = spec("state 5% 30% 20% 40% 2%") else {
        panic!()
    };
    assert_eq!((s.p32, s.p23, s.p14), (pct(0.2), pct(0.4), pct(0.02)));
    assert_eq!(spec("bernoulli 5%"), LossSpec::Bernoulli(pct(0.05)));
    assert_eq!(spec("loss random 5%"), LossSpec::Bernoulli(pct(0.05)));
    assert_eq!(spec("loss 5%"), LossSpec::Bernoulli(pct(0.05)));
    assert_eq!(spec("none"), LossSpec::Bernoulli(Prob::ZERO));
}

#[test]
fn bad_loss_strings_name_the_bad_part() {
    for (bad, part) in [
        ("gemodel", "gemodel"),
        ("gemodel 1% x", "x"),
        ("gemodel 1% 2% 3% 4% 5%", "5%"),
        ("gemodel 120%", "120%"),
        ("state 1% 2% 3% 4% 5% 6%", "6%"),
        ("state 60% 10% 10% 10% 50%", "50%"),
        ("state 10% 60% 50%", "50%"),
        ("bernoulli 5% 25%", "25%"),
        ("bernoulli", "bernoulli"),
        ("foo 5%", "foo"),
        ("slotted-gemodel 1% 2%", "1%"),
        ("slotted-gemodel 0ms 2%", "0ms"),
        ("onoff 1", "onoff"),
        ("onoff -1 2", "-1"),
        ("onoff 0 0", "onoff 0 0"),
        ("replay", "replay"),
        ("", ""),
    ] {
        let e = bad.parse::<LossSpec>().expect_err(bad).to_string();
        assert!(e.contains(&format!("`{part}`")), "{bad:?} -> {e}");
    }
}

#[test]
fn loss_is_decided_by_the_state_before_the_transition() {
    // GE, p = 100 %: the first packet finds GOOD (no loss with 1-k = 0) and moves to BAD; all
    // later packets find BAD (1-h = 100 %) and r = 0 keeps it there.
    let seq = run("gemodel 100% 0% 100% 0%", 1, 5);
    assert_eq!(seq, vec![false, true, true, true, true]);
    // 4-state decides by the state entered: p13 = 100 % loses the very first packet.
    let seq = run("state 100% 0%", 1, 4);
    assert_eq!(seq, vec![true, true, true, true]);
    // 4-state: state 4 (isolated loss) always returns to 1.
    let seq = run("state 0% 100% 0% 100% 100%", 1, 6);
    assert_eq!(seq, vec![true, false, true, false, true, false]);
}

#[test]
fn bernoulli_rates() {
    assert!(run("bernoulli 0%", 1, 10_000).iter().all(|&l| !l));
    assert!(run("bernoulli 100%", 1, 10_000).iter().all(|&l| l));
    let seed = 11;
    let (rate, _) = rate_and_mean_burst(&run("bernoulli 5%", seed, 400_000));
    // Standard error 0.034 % absolute; 5 sigma is under 4 % relative.
    assert_close("bernoulli 5% loss", rate, 0.05, 0.04, seed);
}

/// Closed forms for netem GE (loss drawn with the state before the transition):
/// `pi_B = p/(p+r)`, loss `L = pi_G (1-k) + pi_B (1-h)`, and the mean loss burst
/// `L / P(loss after a delivery)`, which is `1/r` when `1-h = 100 %` and `1-k = 0`.
fn ge_closed_form(g: &GeParams) -> (f64, f64) {
    let (p, r) = (g.p.fraction(), g.r.fraction());
    let pi = [r / (p + r), p / (p + r)];
    let l = [g.k1.fraction(), g.h.complement().fraction()];
    let t = [[1.0 - p, p], [r, 1.0 - r]];
    let loss = pi[0] * l[0] + pi[1] * l[1];
    let mut starts = 0.0;
    for a in 0..2 {
        for b in 0..2 {
            starts += pi[a] * (1.0 - l[a]) * t[a][b] * l[b];
        }
    }
    (loss, loss / starts)
}

#[test]
fn gemodel_long_run_matches_closed_form() {
    // 2 M packets; the slowest-mixing setting (mean bad run 10) has a relative standard error
    // of about 1 % on the loss rate, so 5 % is a > 4 sigma tolerance.
    for (i, s) in [
        "gemodel 1% 10% 70% 0.1%",
        "gemodel 5% 50%",
        "gemodel 2% 25% 100% 0%",
        "gemodel 10%",
        "gemodel 3% 30% 50% 1%",
    ]
    .iter()
    .enumerate()
    {
        let seed = 100 + i as u64;
        let LossSpec::GilbertElliott(g) = spec(s) else {
            panic!()
        };
        let (want_rate, want_burst) = ge_closed_form(&g);
        assert!((g.loss_rate() - want_rate).abs() < 1e-12);
        let (rate, burst) = rate_and_mean_burst(&run(s, seed, 2_000_000));
        assert_close(&format!("{s} loss rate"), rate, want_rate, 0.05, seed);
        assert_close(&format!("{s} mean burst"), burst, want_burst, 0.05, seed);
    }
    // With 1-h = 100 % and 1-k = 0 the mean burst is the mean bad run, 1/r.
    let LossSpec::GilbertElliott(g) = spec("gemodel 2% 25% 100% 0%") else {
        panic!()
    };
    assert!((ge_closed_form(&g).1 - 4.0).abs() < 1e-6);
}

/// Stationary distribution of netem's 4-state chain by power iteration; loss `pi3 + pi4`; mean
/// burst `(pi3 + pi4) / (pi1 (p13 + p14) + pi2 p23)` (bursts are runs of state 3 or a lone 4).
fn four_state_closed_form(s: &FourStateParams) -> (f64, f64) {
    let (p13, p31, p32, p23, p14) = (
        s.p13.fraction(),
        s.p31.fraction(),
        s.p32.fraction(),
        s.p23.fraction(),
        s.p14.fraction(),
    );
    let t = [
        [1.0 - p13 - p14, 0.0, p13, p14],
        [0.0, 1.0 - p23, p23, 0.0],
        [p31, p32, 1.0 - p31 - p32, 0.0],
        [1.0, 0.0, 0.0, 0.0],
    ];
    let mut pi = [0.25; 4];
    for _ in 0..100_000 {
        let mut next = [0.0; 4];
        for a in 0..4 {
            for b in 0..4 {
                next[b] += pi[a] * t[a][b];
            }
        }
        pi = next;
    }
    let loss = pi[2] + pi[3];
    (loss, loss / (pi[0] * (p13 + p14) + pi[1] * p23))
}

#[test]
fn four_state_long_run_matches_closed_form() {
    for (i, s) in [
        "state 1% 50%",
        "state 5% 30% 20% 40% 2%",
        "state 10% 60% 30% 50% 5%",
        "state 2% 10% 10% 20% 1%",
    ]
    .iter()
    .enumerate()
    {
        let seed = 200 + i as u64;
        let LossSpec::FourState(p) = spec(s) else {
            panic!()
        };
        let (want_rate, want_burst) = four_state_closed_form(&p);
        let (rate, burst) = rate_and_mean_burst(&run(s, seed, 2_000_000));
        assert_close(&format!("{s} loss rate"), rate, want_rate, 0.05, seed);
        assert_close(&format!("{s} mean burst"), burst, want_burst, 0.05, seed);
    }
}

#[test]
fn slotted_ge_changes_state_once_per_slot() {
    // AutoRec Fig. 20: every 30 ms, good->bad 20 %, bad->good 80 %, good-state loss 1 %.
    let s = "slotted-gemodel 30ms 20% 80% 100% 1%";
    let seed = 300;
    let seq = run(s, seed, 300_000); // one packet per ms for 300 s = 10 000 slots
    let mut bad_slots = Vec::new();
    for (slot, chunk) in seq.chunks(30).enumerate() {
        let lost = chunk.iter().filter(|&&l| l).count();
        if lost == 30 {
            bad_slots.push(slot);
        } else {
            assert!(
                lost <= 5,
                "slot {slot} lost {lost}/30: state changed inside a slot"
            );
        }
    }
    let frac = bad_slots.len() as f64 / 10_000.0;
    // pi_B = 0.2; slot states are independent (1 - p - r = 0), SE 0.004.
    assert!(
        (frac - 0.2).abs() < 0.02,
        "bad slot fraction {frac} (seed {seed})"
    );

    // The slot states do not depend on the traffic: sending every 3 ms sees the same bad slots.
    let mut sparse = Loss::new(&spec(s), element_rng(seed, "loss")).expect("model");
    let mut sparse_bad = Vec::new();
    for slot in 0..10_000u64 {
        let lost = (0..10)
            .filter(|k| sparse.decide(Instant::from_nanos((slot * 30 + k * 3) * 1_000_000), *k))
            .count();
        if lost == 10 {
            sparse_bad.push(slot as usize);
        }
    }
    assert_eq!(bad_slots, sparse_bad);
}

#[test]
fn onoff_matches_mm_onoff_means() {
    // Mean on 1 s, mean off 0.5 s: a third of the time is off. 4000 s, one packet per ms.
    let seed = 400;
    let seq = run("onoff 1 0.5", seed, 4_000_000);
    let (rate, mean_off) = rate_and_mean_burst(&seq);
    assert_close("onoff off fraction", rate, 1.0 / 3.0, 0.06, seed);
    // Periods are whole ms (truncated), so the mean off run is ~499.5 packets.
    assert_close("onoff mean off period", mean_off, 499.5, 0.08, seed);
    assert!(!seq[0], "mm-onoff starts on");
    assert_eq!(spec("onoff 1s 500ms"), spec("onoff 1 0.5"));
}

#[test]
fn replay_follows_the_file_and_wraps() {
    let dir = std::env::temp_dir().join(format!("recoup-sim-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let good = dir.join("good.loss");
    std::fs::write(&good, "1\n0\n# comment\n\n0\n1\n").expect("write");
    let s = LossSpec::Replay(good.clone());
    let mut loss = Loss::new(&s, element_rng(1, "r")).expect("load");
    let seq: Vec<bool> = (0..8).map(|_| loss.decide(Instant::ZERO, 0)).collect();
    assert_eq!(
        seq,
        vec![true, false, false, true, true, false, false, true]
    );
    let bad = dir.join("bad.loss");
    std::fs::write(&bad, "0\n2\n").expect("write");
    let e = Loss::new(&LossSpec::Replay(bad), element_rng(1, "r"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.loss line 2") && e.contains("`2`"), "{e}");
    let e = Loss::new(&LossSpec::Replay(dir.join("missing")), element_rng(1, "r"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn loss_node_forwards_or_drops_at_once() {
    let a = "10.0.0.1:1".parse().expect("addr");
    let mut node = Loss::new(&spec("bernoulli 50%"), element_rng(5, "l"))
        .expect("model")
        .with_log(10);
    let mut forwarded = 0;
    for i in 0..100 {
        match node.process(
            Some(Datagram::new(a, a, vec![0; 10]).with_id(i)),
            Instant::ZERO,
        ) {
            Output::Datagram(d) => {
                assert_eq!(d.id, i);
                forwarded += 1;
            }
            Output::None => {}
            Output::Callback(_) => panic!("a loss element never waits"),
        }
        assert_eq!(node.process(None, Instant::ZERO), Output::None);
    }
    let st = node.stats();
    assert_eq!((st.received, st.forwarded + st.dropped), (100, 100));
    assert_eq!(st.forwarded, forwarded);
    assert_eq!(
        node.event_log()
            .map(|l| l.events().len() as u64 + l.overflow()),
        Some(st.dropped)
    );
}

/// Fates of keys `keys` sent 0.5 ms apart through a fresh `crn` element.
fn crn_fates(spec: &str, seed: u64, keys: &[u64]) -> Vec<bool> {
    let spec: LossSpec = spec.parse().expect("crn spec");
    let mut loss = Loss::new(&spec, crate::element_rng(seed, "down/0-loss")).expect("element");
    keys.iter()
        .enumerate()
        .map(|(i, &k)| loss.decide(Instant::from_nanos(i as u64 * 500_000), k))
        .collect()
}

#[test]
fn crn_an_inserted_packet_does_not_change_the_fate_of_the_others() {
    for spec in [
        "crn bernoulli 10%",
        "crn gemodel 5% 30% 70%",
        "crn slot=2ms slotted-gemodel 30ms 20% 80% 40% 1%",
    ] {
        for seed in 1..=5u64 {
            let keys: Vec<u64> = (0..4000u64).map(|k| k * 7919 + 1).collect();
            let base = crn_fates(spec, seed, &keys);
            // Same times for the others: the extra packet rides between two of them at the
            // same instant as its successor would under a time-slotted state.
            let spec_parsed: LossSpec = spec.parse().expect("crn spec");
            let mut loss =
                Loss::new(&spec_parsed, crate::element_rng(seed, "down/0-loss")).expect("element");
            let mut with_extra = Vec::new();
            for (i, &k) in keys.iter().enumerate() {
                let at = Instant::from_nanos(i as u64 * 500_000);
                if i % 10 == 3 {
                    let _ = loss.decide(at, 0xdead_0000 + i as u64);
                }
                with_extra.push(loss.decide(at, k));
            }
            assert_eq!(base, with_extra, "{spec} seed {seed}");
            let lost = base.iter().filter(|&&l| l).count();
            assert!(lost > 0, "{spec} seed {seed}: nothing lost");
        }
    }
}

#[test]
fn crn_sequential_draws_do_shift_so_the_test_above_can_fail() {
    // The same insertion under netem's sequential draws changes later fates.
    let spec: LossSpec = "bernoulli 10%".parse().expect("spec");
    let fates = |extra: bool| {
        let mut loss = Loss::new(&spec, crate::element_rng(1, "x")).expect("element");
        let mut out = Vec::new();
        for i in 0..1000u64 {
            if extra && i == 3 {
                let _ = loss.decide(Instant::ZERO, 0);
            }
            out.push(loss.decide(Instant::ZERO, i));
        }
        out
    };
    assert_ne!(fates(false), fates(true));
}

#[test]
fn crn_forecast_agrees_with_the_element_and_rates_hold() {
    for (spec, rate) in [
        ("crn bernoulli 10%", 0.10),
        ("crn gemodel 5% 30% 70%", 0.7 * 5.0 / 35.0),
    ] {
        let parsed: LossSpec = spec.parse().expect("spec");
        let mut loss = Loss::new(&parsed, crate::element_rng(9, "down/0-loss")).expect("element");
        let mut forecast =
            LossForecast::new(&parsed, crate::element_rng(9, "down/0-loss")).expect("forecast");
        let n = 200_000u64;
        let mut lost = 0u64;
        for i in 0..n {
            let at = Instant::from_nanos(i * 250_000);
            // The forecast looks ahead of the element, as the oracle does.
            let predicted = forecast.lost(i ^ 0x55, at);
            let actual = loss.decide(at, i ^ 0x55);
            assert_eq!(predicted, actual, "{spec}: packet {i}");
            lost += u64::from(actual);
        }
        let measured = lost as f64 / n as f64;
        assert!(
            (measured - rate).abs() < 0.15 * rate,
            "{spec}: loss {measured:.4}, expected {rate:.4}"
        );
    }
}

#[test]
fn crn_rejects_models_it_cannot_key() {
    for (bad, part) in [
        ("crn state 1% 50%", "state"),
        ("crn onoff 1s 1s", "onoff"),
        ("crn", "crn"),
        ("crn slot=0ms bernoulli 1%", "slot=0ms"),
        ("crn bernoulli 1% 2%", "2%"),
    ] {
        let e = bad.parse::<LossSpec>().expect_err(bad).to_string();
        assert!(e.contains(&format!("`{part}`")), "{bad}: {e}");
    }
}

/// ART §3.2's burst sizes (37.2 % single, p90 13, p95 27, p99 125) with the p95-p99 slope
/// continued to a largest burst of 183 packets.
const ART_SIZES: &str = "1:37.2% 13:90% 27:95% 125:99% 183:100%";

fn burst_sizes(points: &str) -> BurstSizes {
    let LossSpec::Bursts { sizes, .. } = spec(&format!("bursts 1% {points}")) else {
        panic!()
    };
    sizes
}

/// The sizes of the bursts (runs of losses) in `seq`, a run cut by either end included.
fn burst_lengths(seq: &[bool]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut run = 0;
    for &lost in seq {
        if lost {
            run += 1;
        } else if run > 0 {
            out.push(run);
            run = 0;
        }
    }
    if run > 0 {
        out.push(run);
    }
    out
}

#[test]
fn bursts_parse_and_print_back() {
    let LossSpec::Bursts { rate, pace, sizes } = spec(&format!("bursts 4% {ART_SIZES}")) else {
        panic!()
    };
    assert!((rate - 0.04).abs() < 1e-12 && pace.is_none());
    let want = [(1, 0.372), (13, 0.9), (27, 0.95), (125, 0.99), (183, 1.0)];
    assert_eq!(sizes.points().len(), want.len());
    for (&(s, c), (ws, wc)) in sizes.points().iter().zip(want) {
        assert!(s == ws && (c - wc).abs() < 1e-12, "{s}:{c}");
    }
    assert_eq!(sizes.to_string(), ART_SIZES);
    assert_eq!(
        spec(&format!("loss bursts 4 {ART_SIZES}")),
        spec(&format!("bursts 4% {ART_SIZES}"))
    );
    // Single-packet bursts only: the largest loss rate has every gap one packet.
    let LossSpec::Bursts { sizes, .. } = spec("bursts 50% 1:100%") else {
        panic!()
    };
    assert_eq!((sizes.mean(), sizes.max_loss_rate()), (1.0, 0.5));
    assert_eq!(
        run("bursts 50% 1:100%", 3, 8),
        [true, false, true, false, true, false, true, false]
    );
}

#[test]
fn bad_bursts_name_the_bad_point_and_the_accepted_form() {
    for (bad, part, what) in [
        ("bursts", "bursts", "missing the loss rate"),
        ("bursts 4%", "4%", "missing the burst sizes"),
        ("bursts x 1:100%", "x", "not a percentage"),
        (
            "bursts 4% 2:50% 10:100%",
            "2:50%",
            "the first point is size 1",
        ),
        (
            "bursts 4% 1:37.2% 27:90% 13:95% 125:100%",
            "13:95%",
            "size 13 does not exceed",
        ),
        (
            "bursts 4% 1:37.2% 13:95% 27:90% 125:100%",
            "27:90%",
            "share 0.9 does not exceed",
        ),
        ("bursts 4% 1:0% 10:100%", "1:0%", "outside (0, 1]"),
        (
            "bursts 4% 1:37.2% 13:90%",
            "13:90%",
            "the last point is the largest burst",
        ),
        ("bursts 4% 1:37.2% 13", "13", "SIZE:SHARE"),
        ("bursts 4% 1:37.2% 1.5:100%", "1.5:100%", "whole number"),
        ("bursts 4% 1:37.2% 13:190%", "13:190%", "between 0 and 100"),
        (
            "bursts 4% 1:37.2% 200000:100%",
            "200000:100%",
            "outside 1..=100000",
        ),
        (
            "bursts 51% 1:100%",
            "51%",
            "the highest loss rate with these bursts",
        ),
        ("bursts 4% pace=0ms 1:100%", "pace=0ms", "pace must be > 0"),
        ("bursts 4% pace=10 1:100%", "pace=10", "missing unit"),
        ("bursts 4% 1:100% pace=10ms", "pace=10ms", "SIZE:SHARE"),
    ] {
        let e = bad.parse::<LossSpec>().expect_err(bad).to_string();
        assert!(
            e.contains(&format!("`{part}`")) && e.contains(what),
            "{bad:?} -> {e}"
        );
    }
    // The accepted form is spelled out for a bad point.
    let e = "bursts 4% 1:37.2% 13"
        .parse::<LossSpec>()
        .expect_err("bad")
        .to_string();
    assert!(e.contains("bursts RATE [pace=DUR] SIZE:SHARE"), "{e}");
    let e = "crn bursts 4% 1:100%"
        .parse::<LossSpec>()
        .expect_err("crn")
        .to_string();
    assert!(e.contains("crn draws support"), "{e}");
}

#[test]
fn burst_sizes_points_are_exact_quantiles_and_log_linear_between() {
    let sizes = burst_sizes(ART_SIZES);
    for &(s, c) in sizes.points() {
        assert!((sizes.cdf(s) - c).abs() < 1e-12, "cdf({s})");
        assert_eq!(sizes.quantile(c), s, "quantile({c})");
        // The point is the smallest size that reaches its share.
        assert!(sizes.cdf(s - 1) < c, "cdf({})", s - 1);
    }
    // Log-linear: halfway in log size between 1 and 13 is halfway in share.
    let mid = 13f64.sqrt();
    let (lo, hi) = (sizes.cdf(mid.floor() as u32), sizes.cdf(mid.ceil() as u32));
    assert!(
        lo < (0.372 + 0.9) / 2.0 && (0.372 + 0.9) / 2.0 < hi,
        "{lo} {hi}"
    );
    assert_eq!(
        (sizes.cdf(0), sizes.cdf(183), sizes.cdf(1000)),
        (0.0, 1.0, 1.0)
    );
    assert_eq!((sizes.quantile(1e-9), sizes.quantile(1.0)), (1, 183));
    // The mean is the sum of the probabilities.
    let direct: f64 = (1..=183)
        .map(|s| f64::from(s) * (sizes.cdf(s) - sizes.cdf(s - 1)))
        .sum();
    assert!(
        (sizes.mean() - direct).abs() < 1e-9,
        "{} {direct}",
        sizes.mean()
    );
    assert!((8.0..8.5).contains(&sizes.mean()), "mean {}", sizes.mean());
}

#[test]
fn bursts_follow_the_sizes_and_the_loss_rate_over_many_draws() {
    // 40 seeds x 250,000 packets at 4 %: about 50,000 bursts.
    let sizes = burst_sizes(ART_SIZES);
    let rate = 0.04;
    let mut bursts = Vec::new();
    let (mut lost, mut packets) = (0u64, 0u64);
    for seed in 0..40 {
        let seq = run(&format!("bursts 4% {ART_SIZES}"), seed, 250_000);
        lost += seq.iter().filter(|&&l| l).count() as u64;
        packets += seq.len() as u64;
        bursts.extend(burst_lengths(&seq));
    }
    let n = bursts.len() as f64;
    bursts.sort_unstable();
    // Each point's share within 5 standard errors, and the empirical quantile at the point's
    // share between the distribution's quantiles 5 standard errors either side.
    for &(s, c) in &sizes.points()[..sizes.points().len() - 1] {
        let se = (c * (1.0 - c) / n).sqrt();
        let share = bursts.iter().filter(|&&b| b <= s).count() as f64 / n;
        assert!(
            (share - c).abs() <= 5.0 * se,
            "P(size <= {s}) = {share}, want {c} +- {se}"
        );
        let q = bursts[((c * n).ceil() as usize).max(1) - 1];
        let (lo, hi) = (sizes.quantile(c - 5.0 * se), sizes.quantile(c + 5.0 * se));
        assert!(
            (lo..=hi).contains(&q),
            "{c} quantile {q} outside {lo}..={hi}"
        );
        eprintln!("{c}: share <= {s} {share:.4} (se {se:.4}), quantile {q} ({lo}..={hi})");
    }
    assert!(bursts.iter().all(|&b| (1..=183).contains(&b)));
    // The loss rate: a renewal process of cycles burst B + gap G, G = 1 + geometric with mean
    // 1 / q; SE of lost / packets = sd(B (1 - rate) - rate G) / (E[B + G] sqrt(cycles)).
    let mean_b = sizes.mean();
    let var_b: f64 = (1..=sizes.max())
        .map(|s| (f64::from(s) - mean_b).powi(2) * (sizes.cdf(s) - sizes.cdf(s - 1)))
        .sum();
    let mean_g = mean_b * (1.0 - rate) / rate;
    let var_g = mean_g * (mean_g - 1.0);
    let cycles = packets as f64 / (mean_b + mean_g);
    let se = ((1.0 - rate).powi(2) * var_b + rate * rate * var_g).sqrt()
        / ((mean_b + mean_g) * cycles.sqrt());
    let got = lost as f64 / packets as f64;
    eprintln!("loss rate {got:.5}, want {rate} +- {se:.5}; {n} bursts");
    assert!(
        (got - rate).abs() <= 5.0 * se,
        "loss rate {got}, want {rate} +- {se}"
    );
    // Deterministic per seed; different seeds differ.
    let spec = format!("bursts 4% {ART_SIZES}");
    assert_eq!(run(&spec, 5, 20_000), run(&spec, 5, 20_000));
    assert_ne!(run(&spec, 5, 20_000), run(&spec, 6, 20_000));
}

#[test]
fn bursts_rates_at_the_extremes() {
    assert!(run(&format!("bursts 0% {ART_SIZES}"), 1, 10_000)
        .iter()
        .all(|&l| !l));
    // A gap is never empty, so two bursts never merge: at 30 % every run of losses is one burst,
    // at most the largest size, and the runs' mean is the sizes' mean.
    let seq = run(&format!("bursts 30% {ART_SIZES}"), 2, 1_000_000);
    assert!(burst_lengths(&seq).iter().all(|&b| b <= 183));
    let (rate, mean) = rate_and_mean_burst(&seq);
    assert_close("bursts 30% loss", rate, 0.30, 0.05, 2);
    assert_close(
        "bursts 30% mean burst",
        mean,
        burst_sizes(ART_SIZES).mean(),
        0.08,
        2,
    );
}

/// Loss sequence of `n` packets, one per `interval_us` microseconds.
fn run_every(s: &str, seed: u64, n: u64, interval_us: u64) -> Vec<bool> {
    let mut loss = Loss::new(&spec(s), element_rng(seed, "loss")).expect("model");
    (0..n)
        .map(|i| loss.decide(Instant::from_nanos(i * interval_us * 1000), i))
        .collect()
}

#[test]
fn a_paced_burst_is_an_outage_of_its_size_in_packet_times() {
    let LossSpec::Bursts { pace, .. } = spec(&format!("bursts 4% pace=10ms {ART_SIZES}")) else {
        panic!()
    };
    assert_eq!(pace, Some(Duration::from_millis(10)));
    // Packets one per pace, or faster: every burst runs its full size, so the sequence is the
    // one without a pace (the same draws).
    let free = run_every(&format!("bursts 4% {ART_SIZES}"), 9, 200_000, 10_000);
    for pace in ["10ms", "20ms"] {
        let paced = run_every(
            &format!("bursts 4% pace={pace} {ART_SIZES}"),
            9,
            200_000,
            10_000,
        );
        assert_eq!(paced, free, "pace {pace}");
    }
    // Packets ten times slower than the pace: a burst of s packets loses the ceil(s / 10) that
    // arrive within its s x 10 ms, and the loss rate falls with it.
    let slow = run_every(
        &format!("bursts 4% pace=1ms {ART_SIZES}"),
        9,
        200_000,
        10_000,
    );
    let longest = burst_lengths(&slow).into_iter().max().unwrap_or(0);
    assert!((2..=19).contains(&longest), "longest burst {longest}");
    let (rate, _) = rate_and_mean_burst(&slow);
    let (free_rate, _) = rate_and_mean_burst(&free);
    assert!(rate < 0.6 * free_rate, "{rate} vs {free_rate}");
}
