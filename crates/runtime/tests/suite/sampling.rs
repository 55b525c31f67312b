//! The sampler chain: reproducibility, each filter's effect, and the drawn distribution.

use tessera_core::sampling::{Sampler, SamplingError, SamplingParams};

/// Only the temperature draw: no filters, no penalties.
fn plain(temperature: f32, seed: u64) -> SamplingParams {
    SamplingParams {
        temperature,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        repeat_penalty: 1.0,
        presence_penalty: 0.0,
        frequency_penalty: 0.0,
        penalty_last_n: 64,
        seed,
        logit_bias: Vec::new(),
    }
}

fn draws(params: SamplingParams, logits: &[f32], n: usize) -> Vec<u32> {
    let mut s = Sampler::new(params).unwrap();
    (0..n).map(|_| s.sample(logits).unwrap()).collect()
}

fn histogram(ids: &[u32], n_vocab: usize) -> Vec<usize> {
    let mut h = vec![0; n_vocab];
    for &i in ids {
        h[i as usize] += 1;
    }
    h
}

fn softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
    let e: Vec<f64> = logits.iter().map(|&l| (l as f64 - max).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|x| x / s).collect()
}

const LOGITS: [f32; 8] = [1.0, 3.0, 2.5, -1.0, 0.0, 2.9, -5.0, 0.5];

#[test]
fn same_seed_same_tokens_other_seed_other_tokens() {
    let p = SamplingParams {
        seed: 1234,
        ..Default::default()
    };
    let a = draws(p.clone(), &LOGITS, 200);
    let b = draws(p.clone(), &LOGITS, 200);
    assert_eq!(a, b);
    let c = draws(SamplingParams { seed: 1235, ..p }, &LOGITS, 200);
    assert_ne!(a, c);
}

#[test]
fn reset_replays_the_same_sequence() {
    let mut s = Sampler::new(SamplingParams {
        seed: 9,
        ..Default::default()
    })
    .unwrap();
    let a: Vec<u32> = (0..50).map(|_| s.sample(&LOGITS).unwrap()).collect();
    s.reset();
    let b: Vec<u32> = (0..50).map(|_| s.sample(&LOGITS).unwrap()).collect();
    assert_eq!(a, b);
}

#[test]
fn device_steps_replay_the_samplers_sequence() {
    // A device-side sampler gets each step's draw and window from `device_step`; sampled with
    // the CPU reference they give exactly `sample`'s tokens, penalties and bias included.
    let params = SamplingParams {
        seed: 5,
        repeat_penalty: 1.2,
        frequency_penalty: 0.1,
        presence_penalty: 0.05,
        logit_bias: vec![(2, -0.5)],
        ..Default::default()
    };
    let mut a = Sampler::new(params.clone()).unwrap();
    let mut b = Sampler::new(params).unwrap();
    for i in 0..60 {
        let logits: Vec<f32> = LOGITS.iter().map(|l| l + (i % 7) as f32 * 0.1).collect();
        let want = a.sample(&logits).unwrap();
        let got = b.device_step().sample_cpu(&logits).unwrap();
        assert_eq!(got, want, "step {i}");
        a.accept(want);
        b.accept(got);
    }
    let mut g = Sampler::new(SamplingParams::greedy()).unwrap();
    assert_eq!(g.device_step().u, 0.0);
}

#[test]
fn greedy_is_argmax_with_lowest_id_on_ties() {
    let mut s = Sampler::new(SamplingParams::greedy()).unwrap();
    assert_eq!(s.sample(&LOGITS).unwrap(), 1);
    assert_eq!(s.sample(&[0.0, 5.0, 5.0, 1.0]).unwrap(), 1);
    assert_eq!(s.sample(&[7.0, 7.0]).unwrap(), 0);
    // Negative temperature is greedy too, as in llama.cpp.
    let mut s = Sampler::new(plain(-1.0, 0)).unwrap();
    assert_eq!(s.sample(&[f32::NEG_INFINITY, -3.0, -2.0]).unwrap(), 2);
}

#[test]
fn draw_follows_softmax_distribution() {
    let n = 40_000;
    let h = histogram(&draws(plain(1.0, 77), &LOGITS, n), LOGITS.len());
    let p = softmax(&LOGITS);
    for (i, (&count, &pi)) in h.iter().zip(&p).enumerate() {
        let expected = pi * n as f64;
        let sd = (n as f64 * pi * (1.0 - pi)).sqrt();
        assert!(
            (count as f64 - expected).abs() <= 5.0 * sd + 2.0,
            "token {i}: {count} draws, expected {expected:.0} ± {sd:.0}"
        );
    }
}

#[test]
fn temperature_sharpens_and_flattens() {
    let n = 20_000;
    let cold = histogram(&draws(plain(0.25, 5), &LOGITS, n), 8);
    let warm = histogram(&draws(plain(1.0, 5), &LOGITS, n), 8);
    let hot = histogram(&draws(plain(4.0, 5), &LOGITS, n), 8);
    // The top token gets more mass when colder; the weak token 6 (-5.0) appears only when hot.
    assert!(
        cold[1] > warm[1] && warm[1] > hot[1],
        "{cold:?} {warm:?} {hot:?}"
    );
    assert_eq!(cold[6], 0);
    assert!(hot[6] > 0);
    // Temperature 0.25 follows softmax(logits / 0.25).
    let scaled: Vec<f32> = LOGITS.iter().map(|l| l / 0.25).collect();
    let p = softmax(&scaled);
    let frac1 = cold[1] as f64 / n as f64;
    assert!((frac1 - p[1]).abs() < 0.02, "{frac1} vs {}", p[1]);
}

#[test]
fn top_k_keeps_only_the_k_best() {
    let p = SamplingParams {
        top_k: 2,
        ..plain(5.0, 3)
    };
    let h = histogram(&draws(p, &LOGITS, 5000), 8);
    assert!(h[1] > 0 && h[5] > 0);
    assert_eq!(h.iter().sum::<usize>(), h[1] + h[5], "{h:?}");
    // Ties at the cut: the lower id is kept.
    let p = SamplingParams {
        top_k: 1,
        ..plain(1.0, 3)
    };
    assert!(draws(p, &[1.0, 2.0, 2.0, 0.0], 100).iter().all(|&t| t == 1));
}

#[test]
fn top_p_keeps_the_smallest_prefix_reaching_p() {
    // probs ≈ [0.5, 0.25, 0.125, 0.125]
    let l = [2f32.ln() * 2.0, 2f32.ln(), 0.0, 0.0];
    let h = histogram(
        &draws(
            SamplingParams {
                top_p: 0.7,
                ..plain(1.0, 11)
            },
            &l,
            5000,
        ),
        4,
    );
    assert!(h[0] > 0 && h[1] > 0 && h[2] == 0 && h[3] == 0, "{h:?}");
    // Renormalised over the two kept: 2/3 and 1/3.
    let f0 = h[0] as f64 / 5000.0;
    assert!((f0 - 2.0 / 3.0).abs() < 0.03, "{f0}");
    // top_p = 0 still keeps one token.
    assert!(draws(
        SamplingParams {
            top_p: 0.0,
            ..plain(1.0, 11)
        },
        &l,
        100
    )
    .iter()
    .all(|&t| t == 0));
}

#[test]
fn min_p_drops_tokens_below_a_fraction_of_the_best() {
    // probs relative to the best: 1, 0.5, 0.25, 0.05
    let l = [0.0, 0.5f32.ln(), 0.25f32.ln(), 0.05f32.ln()];
    let h = histogram(
        &draws(
            SamplingParams {
                min_p: 0.3,
                ..plain(1.0, 2)
            },
            &l,
            5000,
        ),
        4,
    );
    assert!(h[0] > 0 && h[1] > 0 && h[2] == 0 && h[3] == 0, "{h:?}");
    let h = histogram(
        &draws(
            SamplingParams {
                min_p: 0.2,
                ..plain(1.0, 2)
            },
            &l,
            5000,
        ),
        4,
    );
    assert!(h[2] > 0 && h[3] == 0, "{h:?}");
}

#[test]
fn filters_look_at_logits_before_temperature() {
    // As in llama.cpp, min-p is applied before temperature: a high temperature does not let a
    // token back in that min-p removed.
    let l = [0.0, 0.5f32.ln(), 0.01f32.ln()];
    let h = histogram(
        &draws(
            SamplingParams {
                min_p: 0.1,
                ..plain(100.0, 4)
            },
            &l,
            3000,
        ),
        3,
    );
    assert_eq!(h[2], 0);
    assert!(h[0] > 1000 && h[1] > 1000, "{h:?}");
}

#[test]
fn repeat_penalty_divides_positive_and_multiplies_negative_logits() {
    let p = SamplingParams {
        repeat_penalty: 4.0,
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(p).unwrap();
    let l = [2.0, 1.0, -1.0, -1.5];
    assert_eq!(s.sample(&l).unwrap(), 0);
    s.accept(0); // 2.0 → 0.5 < 1.0
    assert_eq!(s.sample(&l).unwrap(), 1);
    // Negative side: -1.0 → -4.0 falls below -1.5.
    let l = [-1.0, -1.5];
    let mut s = Sampler::new(SamplingParams {
        repeat_penalty: 4.0,
        ..SamplingParams::greedy()
    })
    .unwrap();
    s.accept(0);
    assert_eq!(s.sample(&l).unwrap(), 1);
}

#[test]
fn presence_and_frequency_penalties() {
    let l = [3.0, 2.0];
    let greedy = SamplingParams::greedy();
    // Presence: once, whatever the count.
    let mut s = Sampler::new(SamplingParams {
        presence_penalty: 0.9,
        ..greedy.clone()
    })
    .unwrap();
    for _ in 0..5 {
        s.accept(0);
    }
    assert_eq!(s.sample(&l).unwrap(), 0); // 3.0 - 0.9 = 2.1 > 2.0
                                          // Frequency: per occurrence.
    let mut s = Sampler::new(SamplingParams {
        frequency_penalty: 0.3,
        ..greedy.clone()
    })
    .unwrap();
    for _ in 0..3 {
        s.accept(0);
    }
    assert_eq!(s.sample(&l).unwrap(), 0); // 3.0 - 0.9 = 2.1
    s.accept(0);
    assert_eq!(s.sample(&l).unwrap(), 1); // 3.0 - 1.2 = 1.8
}

#[test]
fn penalty_window_forgets_old_tokens() {
    let p = SamplingParams {
        repeat_penalty: 10.0,
        penalty_last_n: 3,
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(p).unwrap();
    let l = [2.0, 1.0, 0.5];
    s.accept(0);
    assert_eq!(s.sample(&l).unwrap(), 1);
    s.accept(2);
    s.accept(2);
    s.accept(2); // token 0 has left the 3-token window
    assert_eq!(s.sample(&l).unwrap(), 0);
    // penalty_last_n = 0 disables penalties.
    let mut s = Sampler::new(SamplingParams {
        penalty_last_n: 0,
        repeat_penalty: 10.0,
        ..SamplingParams::greedy()
    })
    .unwrap();
    s.accept(0);
    assert_eq!(s.sample(&l).unwrap(), 0);
}

#[test]
fn masked_tokens_are_never_drawn() {
    let l = [f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY, 0.0];
    let h = histogram(&draws(plain(1.0, 8), &l, 2000), 4);
    assert_eq!(h[0] + h[2], 0);
    assert!(h[1] > 800 && h[3] > 800, "{h:?}");
}

#[test]
fn bad_options_are_typed_errors() {
    let bad = [
        SamplingParams {
            top_p: -0.1,
            ..Default::default()
        },
        SamplingParams {
            top_p: 1.5,
            ..Default::default()
        },
        SamplingParams {
            min_p: 2.0,
            ..Default::default()
        },
        SamplingParams {
            top_k: -3,
            ..Default::default()
        },
        SamplingParams {
            temperature: f32::NAN,
            ..Default::default()
        },
        SamplingParams {
            repeat_penalty: 0.0,
            ..Default::default()
        },
        SamplingParams {
            frequency_penalty: f32::INFINITY,
            ..Default::default()
        },
        SamplingParams {
            penalty_last_n: -2,
            ..Default::default()
        },
    ];
    for p in bad {
        match Sampler::new(p.clone()) {
            Err(SamplingError::InvalidOption { .. }) => {}
            other => panic!("{p:?} gave {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn bad_logits_are_typed_errors() {
    let mut s = Sampler::new(SamplingParams::default()).unwrap();
    assert_eq!(s.sample(&[]), Err(SamplingError::EmptyLogits));
    assert_eq!(
        s.sample(&[0.0, f32::NAN]),
        Err(SamplingError::NanLogit { token: 1 })
    );
    assert_eq!(
        s.sample(&[f32::NEG_INFINITY; 3]),
        Err(SamplingError::AllMasked)
    );
    let mut g = Sampler::new(SamplingParams::greedy()).unwrap();
    assert_eq!(
        g.sample(&[f32::NEG_INFINITY; 3]),
        Err(SamplingError::AllMasked)
    );
}

#[test]
fn large_vocabulary_default_chain_is_reproducible() {
    // A Gemma-sized vocabulary with a few strong tokens: the defaults (top-k 40, top-p 0.95,
    // min-p 0.05) only ever pick among the strong ones.
    let n_vocab = 262_144;
    let mut l = vec![-10.0f32; n_vocab];
    for (i, v) in [(100usize, 5.0f32), (77_777, 4.8), (200_000, 4.5), (5, 1.0)] {
        l[i] = v;
    }
    let a = draws(
        SamplingParams {
            seed: 3,
            ..Default::default()
        },
        &l,
        300,
    );
    let b = draws(
        SamplingParams {
            seed: 3,
            ..Default::default()
        },
        &l,
        300,
    );
    assert_eq!(a, b);
    assert!(
        a.iter().all(|t| [100, 77_777, 200_000].contains(t)),
        "{a:?}"
    );
    for t in [100, 77_777, 200_000] {
        assert!(a.contains(&t));
    }
}

#[test]
fn logit_bias_shifts_and_bans_tokens() {
    let mut s = Sampler::new(SamplingParams {
        logit_bias: vec![(1, f32::NEG_INFINITY)],
        ..SamplingParams::greedy()
    })
    .unwrap();
    assert_eq!(s.sample(&LOGITS).unwrap(), 5); // 1 is banned, 5 (2.9) is next
    let mut s = Sampler::new(SamplingParams {
        logit_bias: vec![(3, 5.0)],
        ..SamplingParams::greedy()
    })
    .unwrap();
    assert_eq!(s.sample(&LOGITS).unwrap(), 3); // -1.0 + 5.0 = 4.0 is now the best
    let banned = SamplingParams {
        logit_bias: vec![(1, f32::NEG_INFINITY), (5, f32::NEG_INFINITY)],
        ..plain(1.0, 3)
    };
    let h = histogram(&draws(banned, &LOGITS, 3000), 8);
    assert_eq!(h[1] + h[5], 0, "{h:?}");
    assert!(Sampler::new(SamplingParams {
        logit_bias: vec![(0, f32::NAN)],
        ..Default::default()
    })
    .is_err());
    // A bias for an id past the vocabulary is ignored, not a panic.
    let mut s = Sampler::new(SamplingParams {
        logit_bias: vec![(1_000_000, 1.0)],
        ..SamplingParams::greedy()
    })
    .unwrap();
    assert_eq!(s.sample(&LOGITS).unwrap(), 1);
}
