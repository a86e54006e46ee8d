//! The order in which the backward pass visits the steps (last to first) and where each step's
//! start and end states come from: kept, or recomputed from the nearest kept state
//! ([`Checkpointing`]).

use super::options::Checkpointing;
use super::tape::Tape;
use crate::error::Result;
use crate::problem::{Model, State};

/// Called once per step s, last to first, with the model, s, state s and state s + 1.
pub(super) type Visit<'a> = dyn FnMut(&Model, usize, &State, &State) -> Result<()> + 'a;

/// States held at once and steps re-solved by one reversal.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Usage {
    live: usize,
    /// The most states held at once (kept ones included).
    pub peak: usize,
    /// Steps re-solved.
    pub recomputed: usize,
}

impl Usage {
    fn hold(&mut self, k: usize) {
        self.live += k;
        self.peak = self.peak.max(self.live);
    }
    fn release(&mut self, k: usize) {
        self.live -= k;
    }
}

/// β(s, r) = C(s + r, s): the most steps `s` snapshots reverse with each step re-solved at most
/// `r` times (Griewank & Walther, revolve), saturating.
fn beta(s: usize, r: usize) -> u128 {
    let mut c: u128 = 1;
    for i in 1..=s as u128 {
        match c.checked_mul(r as u128 + i) {
            Some(v) => c = v / i,
            None => return u128::MAX,
        }
    }
    c
}

impl Tape {
    /// Visits steps `last − 1` down to 0.
    pub(super) fn reverse(&mut self, last: usize, visit: &mut Visit) -> Result<Usage> {
        let mut usage = Usage::default();
        usage.hold(self.kept.len());
        if last == 0 {
            return Ok(usage);
        }
        match self.options.checkpointing {
            Checkpointing::All => {
                for s in (0..last).rev() {
                    visit(&self.model, s, &self.kept[&s], &self.kept[&(s + 1)])?;
                }
            }
            Checkpointing::Every(k) => {
                let mut c = ((last - 1) / k) * k;
                loop {
                    let start = self.kept[&c].clone();
                    usage.hold(1);
                    self.reverse_stored(c, (c + k).min(last), start, visit, &mut usage)?;
                    usage.release(1);
                    if c == 0 {
                        break;
                    }
                    c -= k;
                }
            }
            Checkpointing::Binomial(snapshots) => {
                let start = self.kept[&0].clone();
                self.revolve(0, last, snapshots, &start, visit, &mut usage)?;
            }
        }
        Ok(usage)
    }

    /// Re-solves steps a..b from `start` keeping every state, then visits them backwards.
    fn reverse_stored(
        &mut self,
        a: usize,
        b: usize,
        start: State,
        visit: &mut Visit,
        usage: &mut Usage,
    ) -> Result<()> {
        let mut states = vec![start];
        for i in a..b {
            let next = self.recompute(&states[i - a], i)?;
            usage.recomputed += 1;
            usage.hold(1);
            states.push(next);
        }
        for i in (a..b).rev() {
            visit(&self.model, i, &states[i - a], &states[i - a + 1])?;
        }
        usage.release(b - a);
        Ok(())
    }

    /// Reverses steps a..b from state a with `s` free snapshots: advance to the split m, keep
    /// state m, reverse m..b with one snapshot fewer, then a..m (Griewank's binomial rule:
    /// with r the fewest re-solves per step for which β(s, r) ≥ b − a, m − a ≤ β(s, r − 1)
    /// and b − m ≤ β(s − 1, r)).
    fn revolve(
        &mut self,
        a: usize,
        b: usize,
        s: usize,
        start: &State,
        visit: &mut Visit,
        usage: &mut Usage,
    ) -> Result<()> {
        let l = b - a;
        if l == 1 || s == 0 {
            for i in (a..b).rev() {
                let mut cur = start.clone();
                usage.hold(2);
                for j in a..i {
                    cur = self.recompute(&cur, j)?;
                    usage.recomputed += 1;
                }
                let next = self.recompute(&cur, i)?;
                usage.recomputed += 1;
                visit(&self.model, i, &cur, &next)?;
                usage.release(2);
            }
            return Ok(());
        }
        let mut r = 0;
        while beta(s, r) < l as u128 {
            r += 1;
        }
        let over = (l as u128).saturating_sub(beta(s - 1, r));
        let m = a + (over.max(1) as usize).min(l - 1);
        let mut cur = start.clone();
        usage.hold(1);
        for j in a..m {
            cur = self.recompute(&cur, j)?;
            usage.recomputed += 1;
        }
        self.revolve(m, b, s - 1, &cur, visit, usage)?;
        drop(cur);
        usage.release(1);
        self.revolve(a, m, s, start, visit, usage)
    }
}

#[cfg(test)]
mod tests {
    use super::beta;

    #[test]
    fn beta_is_the_binomial_coefficient() {
        assert_eq!(beta(0, 5), 1);
        assert_eq!(beta(3, 0), 1);
        assert_eq!(beta(2, 3), 10);
        assert_eq!(beta(3, 4), 35);
        for s in 1..6 {
            for r in 1..6 {
                assert_eq!(beta(s, r), beta(s, r - 1) + beta(s - 1, r));
            }
        }
    }
}
