//! Token sampling as llama.cpp's samplers do it (`src/llama-sampler.cpp`): the candidates are
//! every token with its logit; each [`Stage`] of a [`Chain`] narrows or rescales them in order
//! (llama.cpp's default order is penalties, top-k, top-p, min-p, temperature), and the last
//! step either takes the highest logit ([`Chain::greedy`]) or draws from the softmax with a
//! seeded generator of this crate ([`Rng`]; the same seed gives the same tokens).

use std::collections::{HashMap, VecDeque};

use crate::vocab::Token;
use crate::{Error, Result};

/// One candidate token (`llama_token_data`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// The token.
    pub id: Token,
    /// Its logit, as rescaled by the stages so far.
    pub logit: f32,
    /// Its probability, where a stage computed one (softmax of the logits).
    pub p: f32,
}

/// The candidates (`llama_token_data_array`).
#[derive(Clone, Debug, PartialEq)]
pub struct Candidates {
    /// The candidates left.
    pub data: Vec<Candidate>,
    /// Whether `data` is sorted by descending logit.
    pub sorted: bool,
}

impl Candidates {
    /// Every token of `logits` (token `i` has logit `logits[i]`), unsorted.
    pub fn from_logits(logits: &[f32]) -> Candidates {
        let data = logits
            .iter()
            .enumerate()
            .map(|(i, &logit)| Candidate {
                id: i as Token,
                logit,
                p: 0.0,
            })
            .collect();
        Candidates {
            data,
            sorted: false,
        }
    }

    fn sort(&mut self) {
        if !self.sorted {
            // Stable: equal logits keep token order.
            self.data.sort_by(|a, b| b.logit.total_cmp(&a.logit));
            self.sorted = true;
        }
    }

    fn max_logit(&self) -> f32 {
        self.data
            .iter()
            .map(|c| c.logit)
            .fold(f32::NEG_INFINITY, f32::max)
    }

    /// Sets each `p` to the softmax of the logits (`llama_sampler_softmax_impl`).
    pub fn softmax(&mut self) {
        let max = self.max_logit();
        let mut sum = 0.0f32;
        for c in &mut self.data {
            c.p = (c.logit - max).exp();
            sum += c.p;
        }
        for c in &mut self.data {
            c.p /= sum;
        }
    }
}

/// One narrowing or rescaling step.
#[derive(Clone, Debug, PartialEq)]
pub enum Stage {
    /// Repetition penalties over the last `last_n` accepted tokens
    /// (`llama_sampler_init_penalties`): a seen token's logit is divided by `repeat` when
    /// positive, multiplied by it otherwise, then lowered by `count * freq + present`.
    Penalties {
        /// How many of the latest accepted tokens count (0 disables the stage).
        last_n: usize,
        /// The repetition penalty (1 = none).
        repeat: f32,
        /// The frequency penalty per occurrence.
        freq: f32,
        /// The presence penalty.
        present: f32,
    },
    /// The `k` highest logits (`k == 0` keeps all).
    TopK(usize),
    /// The smallest set of most likely tokens whose probabilities sum to at least `p`, and at
    /// least `min_keep` tokens (`p >= 1` keeps all).
    TopP {
        /// The probability mass to keep, in (0, 1].
        p: f32,
        /// The fewest tokens to keep.
        min_keep: usize,
    },
    /// The tokens whose probability is at least `p` times the highest one, and at least
    /// `min_keep` tokens (`p == 0` keeps all).
    MinP {
        /// The fraction of the highest probability, in [0, 1].
        p: f32,
        /// The fewest tokens to keep.
        min_keep: usize,
    },
    /// Logits divided by the temperature; a temperature `<= 0` leaves only the highest logit.
    Temperature(f32),
}

impl Stage {
    fn check(&self) -> Result<()> {
        let bad = |what: &str, v: f32| {
            Err(Error::InvalidArgument(format!(
                "{what} = {v} is out of range"
            )))
        };
        match *self {
            Stage::Penalties {
                repeat,
                freq,
                present,
                ..
            } => {
                if !(repeat.is_finite() && repeat > 0.0) {
                    return bad("repeat penalty", repeat);
                }
                if !freq.is_finite() {
                    return bad("frequency penalty", freq);
                }
                if !present.is_finite() {
                    return bad("presence penalty", present);
                }
            }
            Stage::TopP { p, .. } if !(p > 0.0 && p.is_finite()) => return bad("top_p", p),
            Stage::MinP { p, .. } if !(0.0..=1.0).contains(&p) => return bad("min_p", p),
            Stage::Temperature(t) if t.is_nan() || t.is_infinite() => return bad("temperature", t),
            _ => {}
        }
        Ok(())
    }

    /// Applies the stage; `counts` are the occurrences of each token in the penalty window.
    fn apply(&self, c: &mut Candidates, counts: &HashMap<Token, usize>) {
        match *self {
            Stage::Penalties {
                last_n,
                repeat,
                freq,
                present,
            } => {
                if last_n == 0 || (repeat == 1.0 && freq == 0.0 && present == 0.0) {
                    return;
                }
                for cand in &mut c.data {
                    let Some(&n) = counts.get(&cand.id) else {
                        continue;
                    };
                    if cand.logit <= 0.0 {
                        cand.logit *= repeat;
                    } else {
                        cand.logit /= repeat;
                    }
                    cand.logit -= n as f32 * freq + present;
                }
                c.sorted = false;
            }
            Stage::TopK(k) => {
                if k == 0 {
                    return;
                }
                c.sort();
                c.data.truncate(k);
            }
            Stage::TopP { p, min_keep } => {
                if p >= 1.0 || c.data.is_empty() {
                    return;
                }
                c.softmax();
                c.sort();
                let mut cum = 0.0f32;
                let mut keep = c.data.len();
                for (i, cand) in c.data.iter().enumerate() {
                    cum += cand.p;
                    if cum >= p && i + 1 >= min_keep {
                        keep = i + 1;
                        break;
                    }
                }
                c.data.truncate(keep);
            }
            Stage::MinP { p, min_keep } => {
                if p <= 0.0 || c.data.is_empty() {
                    return;
                }
                let min_logit = c.max_logit() + p.ln();
                let kept = c.data.iter().filter(|x| x.logit >= min_logit).count();
                if kept > 0 && kept >= min_keep {
                    c.data.retain(|x| x.logit >= min_logit);
                } else {
                    c.sort();
                    let keep = (1..c.data.len())
                        .find(|&i| c.data[i].logit < min_logit && i >= min_keep)
                        .unwrap_or(c.data.len());
                    c.data.truncate(keep);
                }
            }
            Stage::Temperature(t) => {
                if t <= 0.0 {
                    let Some(best) = argmax(&c.data) else { return };
                    for (i, cand) in c.data.iter_mut().enumerate() {
                        if i != best {
                            cand.logit = f32::NEG_INFINITY;
                        }
                    }
                    return;
                }
                for cand in &mut c.data {
                    cand.logit /= t;
                }
            }
        }
    }
}

/// The index of the first highest logit.
fn argmax(data: &[Candidate]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, c) in data.iter().enumerate() {
        if best.is_none_or(|b| c.logit > data[b].logit) {
            best = Some(i);
        }
    }
    best
}

/// A small seeded generator: SplitMix64 (Steele, Lea and Flood), whose outputs for a seed are
/// fixed, so sampling with the same seed repeats exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// How the chain picks the token at the end.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pick {
    Greedy,
    Dist(Rng),
}

/// The settings of llama.cpp's default chain.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Temperature; `<= 0` is greedy.
    pub temp: f32,
    /// Top-k (0 = off).
    pub top_k: usize,
    /// Top-p (1 = off).
    pub top_p: f32,
    /// Min-p (0 = off).
    pub min_p: f32,
    /// Repetition penalty (1 = off).
    pub repeat_penalty: f32,
    /// How many recent tokens the penalties look at.
    pub penalty_last_n: usize,
    /// The generator's seed.
    pub seed: u64,
}

impl Default for Params {
    /// llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no repetition
    /// penalty over the last 64 tokens.
    fn default() -> Params {
        Params {
            temp: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            penalty_last_n: 64,
            seed: 0,
        }
    }
}

/// A chain of stages and a final pick, with the history the penalties need
/// (`llama_sampler_chain`).
#[derive(Clone, Debug, PartialEq)]
pub struct Chain {
    stages: Vec<Stage>,
    pick: Pick,
    history: VecDeque<Token>,
    counts: HashMap<Token, usize>,
    window: usize,
}

impl Chain {
    /// `stages` in order, then a draw from the softmax seeded with `seed`. `Err` names a stage
    /// parameter that is out of range.
    pub fn new(stages: Vec<Stage>, seed: u64) -> Result<Chain> {
        Chain::build(stages, Pick::Dist(Rng::new(seed)))
    }

    /// `stages` in order, then the highest logit.
    pub fn greedy(stages: Vec<Stage>) -> Result<Chain> {
        Chain::build(stages, Pick::Greedy)
    }

    /// llama.cpp's default chain for `params` (penalties, top-k, top-p, min-p, temperature,
    /// draw); greedy when `params.temp <= 0`.
    pub fn from_params(params: &Params) -> Result<Chain> {
        let penalties = Stage::Penalties {
            last_n: params.penalty_last_n,
            repeat: params.repeat_penalty,
            freq: 0.0,
            present: 0.0,
        };
        if params.temp <= 0.0 {
            return Chain::greedy(vec![penalties]);
        }
        Chain::new(
            vec![
                penalties,
                Stage::TopK(params.top_k),
                Stage::TopP {
                    p: params.top_p,
                    min_keep: 1,
                },
                Stage::MinP {
                    p: params.min_p,
                    min_keep: 1,
                },
                Stage::Temperature(params.temp),
            ],
            params.seed,
        )
    }

    fn build(stages: Vec<Stage>, pick: Pick) -> Result<Chain> {
        for s in &stages {
            s.check()?;
        }
        let window = stages
            .iter()
            .map(|s| match s {
                Stage::Penalties { last_n, .. } => *last_n,
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        Ok(Chain {
            stages,
            pick,
            history: VecDeque::new(),
            counts: HashMap::new(),
            window,
        })
    }

    /// Runs the stages on `candidates` without picking (for inspection and tests).
    pub fn apply(&self, candidates: &mut Candidates) {
        for s in &self.stages {
            s.apply(candidates, &self.counts);
        }
    }

    /// Picks a token from `logits` (one per vocabulary entry) and [accepts](Chain::accept) it.
    /// `Err` when `logits` is empty or not finite somewhere.
    pub fn sample(&mut self, logits: &[f32]) -> Result<Token> {
        if logits.is_empty() {
            return Err(Error::InvalidArgument("logits is empty".into()));
        }
        if let Some(i) = logits.iter().position(|x| x.is_nan()) {
            return Err(Error::InvalidArgument(format!("logits[{i}] is NaN")));
        }
        let mut c = Candidates::from_logits(logits);
        self.apply(&mut c);
        let i = match &mut self.pick {
            Pick::Greedy => argmax(&c.data),
            Pick::Dist(rng) => draw(&mut c, rng),
        };
        let id = c.data[i.expect("stages always keep a candidate")].id;
        self.accept(id);
        Ok(id)
    }

    /// Records `id` as generated, for the penalties (`llama_sampler_accept`).
    pub fn accept(&mut self, id: Token) {
        if self.window == 0 {
            return;
        }
        if self.history.len() == self.window {
            if let Some(old) = self.history.pop_front() {
                if let Some(n) = self.counts.get_mut(&old) {
                    *n -= 1;
                    if *n == 0 {
                        self.counts.remove(&old);
                    }
                }
            }
        }
        self.history.push_back(id);
        *self.counts.entry(id).or_insert(0) += 1;
    }

    /// Forgets the history (`llama_sampler_reset`); the generator keeps its state.
    pub fn reset(&mut self) {
        self.history.clear();
        self.counts.clear();
    }
}

/// `llama_sampler_dist`: the first candidate at which the running sum of `exp(logit - max)`
/// reaches a uniform fraction of the total.
fn draw(c: &mut Candidates, rng: &mut Rng) -> Option<usize> {
    let u = rng.next_f64();
    if c.data.len() <= 1 {
        return (!c.data.is_empty()).then_some(0);
    }
    let max = c.max_logit();
    let mut total = 0.0f64;
    for cand in &mut c.data {
        cand.p = (cand.logit - max).exp();
        total += f64::from(cand.p);
    }
    let target = total * u;
    let mut run = 0.0f64;
    let found = c.data.iter().position(|cand| {
        run += f64::from(cand.p);
        run >= target
    });
    Some(found.unwrap_or(c.data.len() - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(c: &Candidates) -> Vec<Token> {
        c.data.iter().map(|x| x.id).collect()
    }

    fn run(stage: Stage, logits: &[f32]) -> Candidates {
        let chain = Chain::greedy(vec![stage]).unwrap();
        let mut c = Candidates::from_logits(logits);
        chain.apply(&mut c);
        c
    }

    // Probabilities 0.1, 0.2, 0.3, 0.4 for tokens 0..4.
    fn tenths() -> Vec<f32> {
        [1.0f32, 2.0, 3.0, 4.0].iter().map(|x| x.ln()).collect()
    }

    #[test]
    fn top_k_keeps_the_k_highest_in_order() {
        assert_eq!(ids(&run(Stage::TopK(2), &[0.5, 3.0, -1.0, 2.0])), [1, 3]);
        assert_eq!(ids(&run(Stage::TopK(0), &[0.5, 3.0])), [0, 1]);
        assert_eq!(ids(&run(Stage::TopK(9), &[0.5, 3.0])), [1, 0]);
    }

    #[test]
    fn top_p_keeps_the_smallest_set_reaching_p() {
        let c = run(
            Stage::TopP {
                p: 0.5,
                min_keep: 1,
            },
            &tenths(),
        );
        assert_eq!(ids(&c), [3, 2]);
        assert!((c.data[0].p - 0.4).abs() < 1e-6 && (c.data[1].p - 0.3).abs() < 1e-6);
        assert_eq!(
            ids(&run(
                Stage::TopP {
                    p: 0.1,
                    min_keep: 3
                },
                &tenths()
            )),
            [3, 2, 1]
        );
        assert_eq!(
            ids(&run(
                Stage::TopP {
                    p: 1.0,
                    min_keep: 1
                },
                &tenths()
            )),
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn min_p_keeps_tokens_above_a_fraction_of_the_best() {
        // 0.6 × 0.4 = 0.24: tokens with p 0.3 and 0.4 stay, in their original order.
        assert_eq!(
            ids(&run(
                Stage::MinP {
                    p: 0.6,
                    min_keep: 1
                },
                &tenths()
            )),
            [2, 3]
        );
        // Too few kept for min_keep: the sorted fallback keeps min_keep.
        assert_eq!(
            ids(&run(
                Stage::MinP {
                    p: 0.99,
                    min_keep: 3
                },
                &tenths()
            )),
            [3, 2, 1]
        );
    }

    #[test]
    fn temperature_scales_or_keeps_only_the_best() {
        let c = run(Stage::Temperature(0.5), &[1.0, -2.0]);
        assert_eq!(
            c.data.iter().map(|x| x.logit).collect::<Vec<_>>(),
            [2.0, -4.0]
        );
        let c = run(Stage::Temperature(0.0), &[1.0, 3.0, 2.0]);
        let l: Vec<f32> = c.data.iter().map(|x| x.logit).collect();
        assert_eq!(l, [f32::NEG_INFINITY, 3.0, f32::NEG_INFINITY]);
    }

    #[test]
    fn penalties_follow_llama_cpp() {
        let mut chain = Chain::greedy(vec![Stage::Penalties {
            last_n: 3,
            repeat: 2.0,
            freq: 0.1,
            present: 0.5,
        }])
        .unwrap();
        for id in [2, 0, 1, 1] {
            chain.accept(id);
        }
        // The window holds 0, 1, 1: token 2 fell out.
        let mut c = Candidates::from_logits(&[2.0, -1.0, 0.5]);
        chain.apply(&mut c);
        let l: Vec<f32> = c.data.iter().map(|x| x.logit).collect();
        assert!((l[0] - 0.4).abs() < 1e-6, "{l:?}");
        assert!((l[1] + 2.7).abs() < 1e-6, "{l:?}");
        assert_eq!(l[2], 0.5);
    }

    #[test]
    fn splitmix64_reference_outputs() {
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
        let x = Rng::new(7).next_f64();
        assert!((0.0..1.0).contains(&x));
    }

    #[test]
    fn draw_picks_by_cumulative_probability() {
        // With seed 0 the first uniform draw is 0xE220A8397B1DCDAF >> 11 / 2^53 ≈ 0.8833:
        // cumulative 0.1, 0.3, 0.6, 1.0 first reaches it at token 3.
        let u = (0xE220_A839_7B1D_CDAFu64 >> 11) as f64 / (1u64 << 53) as f64;
        assert!((u - 0.883_33).abs() < 1e-4, "{u}");
        let mut chain = Chain::new(vec![], 0).unwrap();
        assert_eq!(chain.sample(&tenths()).unwrap(), 3);
        // Same seed, same tokens; the sequence is not constant.
        let draws = |seed| {
            let mut ch = Chain::new(vec![Stage::Temperature(1.0)], seed).unwrap();
            (0..32)
                .map(|_| ch.sample(&tenths()).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(42), draws(42));
        assert_ne!(draws(42), draws(43));
        let d = draws(42);
        assert!(d.iter().any(|&t| t != d[0]));
    }

    #[test]
    fn default_chain_and_greedy() {
        let logits = [0.1f32, 5.0, 4.9, -3.0];
        let mut g = Chain::from_params(&Params {
            temp: 0.0,
            ..Params::default()
        })
        .unwrap();
        assert_eq!(g.sample(&logits).unwrap(), 1);
        // Repetition penalty 2 halves token 1's logit once it was generated: 2.5 < 4.9.
        let mut g = Chain::from_params(&Params {
            temp: 0.0,
            repeat_penalty: 2.0,
            ..Params::default()
        })
        .unwrap();
        assert_eq!(g.sample(&logits).unwrap(), 1);
        assert_eq!(g.sample(&logits).unwrap(), 2);
        // Top-k 1 leaves only the best whatever the seed.
        let mut c = Chain::from_params(&Params {
            top_k: 1,
            seed: 9,
            ..Params::default()
        })
        .unwrap();
        assert!((0..10).all(|_| c.sample(&logits).unwrap() == 1));
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(Chain::new(
            vec![Stage::TopP {
                p: 0.0,
                min_keep: 1
            }],
            0
        )
        .is_err());
        assert!(Chain::new(
            vec![Stage::MinP {
                p: 1.5,
                min_keep: 1
            }],
            0
        )
        .is_err());
        assert!(Chain::new(vec![Stage::Temperature(f32::NAN)], 0).is_err());
        let e = Chain::greedy(vec![Stage::Penalties {
            last_n: 4,
            repeat: 0.0,
            freq: 0.0,
            present: 0.0,
        }]);
        assert!(e.unwrap_err().to_string().contains("repeat penalty"));
        let mut g = Chain::greedy(vec![]).unwrap();
        assert!(g.sample(&[]).is_err());
        assert!(g
            .sample(&[0.0, f32::NAN])
            .unwrap_err()
            .to_string()
            .contains("logits[1]"));
    }
}
